"""What the Telegram transport says to people in its own words (agents speak for themselves)."""

from __future__ import annotations

__all__ = [
    "ADMIN_UNKNOWN",
    "APOLOGY",
    "APOLOGY_SAVED",
    "CANT_READ",
    "CONFIRM_FORGET_ALL",
    "CONFIRM_FORGET_ALL_PRIVATE",
    "DOCUMENT_SAVED",
    "DOCUMENT_UNREADABLE",
    "HUB_COMMANDS",
    "NOT_ADMIN",
    "NOT_ADMIN_FOR",
    "REFUSAL",
]

REFUSAL = (
    "Sorry, this bot is private and you are not on its list of allowed users. Nothing you send here is stored. "
    "If someone gave you an invite code, send /start <code>."
)
APOLOGY_SAVED = "Sorry, something went wrong; your message is saved."
APOLOGY = "Sorry, something went wrong; please send your message again."
CANT_READ = (
    "I can't read {what} yet; I noted that you sent it. Write to me in text, or send a .txt, .md, .csv, .eml or .json file."
)
DOCUMENT_SAVED = "Saved {name} ({size}) in this chat's memory: ask me about it, or /search it."
DOCUMENT_UNREADABLE = "I kept a note that you sent {name}, but I can only read UTF-8 text files up to 1 MB."
NOT_ADMIN = "Only this group's administrators can erase its memory with /forget all. Nothing was erased."
NOT_ADMIN_FOR = "Only this group's administrators can {what}. Nothing was changed."
ADMIN_UNKNOWN = "I could not check who administers this group, so nothing was changed. Please try again in a minute."
CONFIRM_FORGET_ALL = (
    "This erases everything I keep about this group, for everyone: messages, facts, notes, tasks and reminders. "
    "Press Erase everything (or send /forget all again) within 60 seconds to confirm."
)
CONFIRM_FORGET_ALL_PRIVATE = (
    "This erases everything I keep about you: messages, facts, notes, tasks and reminders. "
    "Press Erase everything (or send /forget all again) within 60 seconds to confirm."
)

# setMyCommands descriptions of the hub's own commands (agents bring their description).
HUB_COMMANDS: dict[str, str] = {
    "start": "Start: what I can do",
    "help": "How to talk to me",
    "agents": "Who is on the team; /agents <name>: what it learnt",
    "feedback": "Tell the last agent what was wrong: /feedback <text>",
    "channels": "The agents' talk channels",
    "remember": "Keep a fact: /remember <fact>",
    "facts": "What I keep about this chat",
    "forget": "Drop a fact, or /forget all to erase this chat",
    "search": "Search older messages: /search <words>",
    "usage": "Tokens sent against full history",
    "events": "What the agents did recently",
    "settings": "This chat's time zone, language and agents",
}
