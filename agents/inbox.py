"""``inbox``: keep pasted or forwarded emails, pull out what matters, draft replies (never send).

Extraction is deterministic (header lines, date phrases, imperative lines) so the model
gets the sender, subject, dates and action items without spending tokens on the body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from email.utils import parseaddr, parsedate_to_datetime

from pydantic import BaseModel, Field

from scopehub import memory

from ._dates import find_dates, format_date, local_now
from ._spec import AgentSpec, ToolContext, tool

NAME = "inbox"
EMAIL, DRAFT = "email", "draft"
_READ_CHARS = 3000
_MAX_ACTIONS = 8

_HEADER_RE = re.compile(
    r"^[>\s*]*(from|to|cc|subject|date|sent|von|an|betreff|datum|gesendet|de|à|objet|envoyé|para|asunto|fecha|enviado)"
    r"\s*:\s*\**\s*(.*?)\s*$",
    re.IGNORECASE,
)
# A header's name in the router's other languages (German, French, Spanish), as its English name.
_HEADER_NAMES = {
    "von": "from", "de": "from", "an": "to", "à": "to", "para": "to",
    "betreff": "subject", "objet": "subject", "asunto": "subject",
    "datum": "date", "fecha": "date", "gesendet": "sent", "envoyé": "sent", "enviado": "sent",
}
_ADDRESS_RE = re.compile(r"^\s*/\w+(?:@\w+)?\s+")  # "/inbox ..." or "/inbox@bot ..."
_FORWARD_RE = re.compile(
    r"^[-\s]*(?:forwarded message|original message|begin forwarded message|weitergeleitete nachricht|ursprüngliche nachricht"
    r"|message d'origine|message transféré|mensaje original|mensaje reenviado)[-:\s]*$",
    re.IGNORECASE,
)
# A salutation in front of a sentence ("Dear customer, your invoice is due...") is dropped.
_SALUTATION_RE = re.compile(r"^(?:hi|hello|hey|dear|good (?:morning|afternoon|evening))\b[^,.!?]{0,40}[,!]\s*", re.IGNORECASE)
_SIGN_OFF_RE = re.compile(
    r"^(?:thanks|thank you|many thanks|best|regards|kind regards|best regards|cheers|sincerely|sent from)\b",
    re.IGNORECASE,
)
_REQUEST_RE = re.compile(
    r"\b(?:please|pls|kindly|could you|can you|would you|will you|make sure|don't forget|do not forget|remember to|"
    r"need you to|needs? to be|action required|deadline|no later than|asap|let me know|rsvp|"
    # The same asking in German, French and Spanish: "Bitte ...", "Merci de ...", "Veuillez ...", "Por favor, envíe ...".
    r"bitte|(?:könnten|können|würden) sie|kannst du|denken sie (?:bitte )?daran|merci de|veuillez|pourriez-vous|pouvez-vous|"
    r"n'oubliez pas|por favor|podría|podrías|no olvide|le rogamos|confirme)\b",
    re.IGNORECASE,
)
_BY_DATE_RE = re.compile(
    r"\b(?:by|before|until|due)\s+(?:the\s+)?(?:end of|eod|eow|\w+day\b|\d|tomorrow|tonight|today|next|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
    # "bis Freitag", "bis zum 15.", "avant le 20 décembre", "avant vendredi", "antes del lunes", "antes del 5"
    r"|\b(?:bis|vor)\s+(?:zum\s+|spätestens\s+|ende\s+)?(?:\w+tag\b|mittwoch|\d|morgen|nächste)"
    r"|\b(?:avant|d'ici)\s+(?:le\s+|la\s+fin\s+)?(?:lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|\d|demain)"
    r"|\b(?:antes\s+del?|hasta\s+el|para\s+el)\s+(?:lunes|martes|miércoles|jueves|viernes|sábado|domingo|\d|día)",
    re.IGNORECASE,
)
# Lines that start with one of these verbs read as instructions ("Send the slides", "Sign here").
_IMPERATIVE_VERBS = frozenset(
    {
        "send", "review", "sign", "confirm", "reply", "respond", "call", "book", "submit", "pay", "update",
        "bring", "prepare", "schedule", "complete", "fill", "return", "check", "approve", "share", "read",
        "forward", "print", "register", "renew", "finish", "email", "contact", "arrange", "order", "cancel",
        "join", "attend", "upload", "install", "verify", "provide", "remember", "note",
    }
)
# A date right after one of these words is a deadline ("reply by Friday", "due: May 3").
_DEADLINE_BEFORE_RE = re.compile(
    r"\b(?:by|before|until|till|due|deadline|no later than|latest)\b[^.!?\n]{0,20}$", re.IGNORECASE
)
# Not at a German ordinal date: "am Dienstag, 9. Dezember, kommt ..." is one sentence.
_SENTENCE_RE = re.compile(r"(?<=[.!?])(?<!\b\d\.)(?<!\b\d\d\.)\s+(?=[A-Z])")
_BULLET_RE = re.compile(r"^\s*(?:[-*•·]|\d+[.)])\s+")


@dataclass
class ParsedEmail:
    """What :func:`parse_email` pulls out of a pasted email."""

    sender: str = ""
    to: str = ""
    subject: str = ""
    date: date | None = None
    date_text: str = ""
    body: str = ""
    dates: list[tuple[str, date]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)


def _email_date(value: str, today: date) -> date | None:
    try:
        return parsedate_to_datetime(value).date()  # RFC 2822: "Mon, 29 Apr 2024 10:15:00 +0200"
    except (TypeError, ValueError, IndexError):
        pass
    try:
        return datetime.fromisoformat(value.strip()).date()
    except ValueError:
        pass
    # Mail clients' forward headers: "Mon, Apr 29, 2024 at 10:15 AM".
    found = find_dates(value, today)
    return found[0][1] if found else None


def _actions(body: str) -> list[str]:
    items: list[str] = []
    for raw_line in body.splitlines():
        line = _SALUTATION_RE.sub("", raw_line.strip().lstrip(">").strip())
        if not line or (_SIGN_OFF_RE.match(line) and len(line) < 40) or (line.endswith(":") and len(line) < 40):
            continue
        line = _BULLET_RE.sub("", line)
        for sentence in _SENTENCE_RE.split(line):
            sentence = sentence.strip()
            if len(sentence) < 6 or (_SIGN_OFF_RE.match(sentence) and len(sentence) < 40):
                continue
            first = re.sub(r"[^a-z]", "", sentence.split()[0].lower())
            if _REQUEST_RE.search(sentence) or _BY_DATE_RE.search(sentence) or first in _IMPERATIVE_VERBS:
                text = sentence if len(sentence) <= 200 else sentence[:199] + "…"
                if text not in items:
                    items.append(text)
            if len(items) >= _MAX_ACTIONS:
                return items
    return items


def parse_email(text: str, today: date) -> ParsedEmail:
    """Sender, recipient, subject, date, body, date mentions and action items of a pasted email."""
    parsed = ParsedEmail()
    lines = text.splitlines()
    header_end = -1
    for index, line in enumerate(lines):
        if _FORWARD_RE.match(line.strip()):
            continue
        match = _HEADER_RE.match(line)
        if not match:
            # The header block ends at the first blank line after a header.
            if header_end >= 0 and not line.strip():
                break
            continue
        name, value = match[1].lower(), match[2].strip("* ")
        name = _HEADER_NAMES.get(name, name)
        if name == "from" and not parsed.sender:
            parsed.sender = value
        elif name == "to" and not parsed.to:
            parsed.to = value
        elif name == "subject" and not parsed.subject:
            parsed.subject = value
        elif name in ("date", "sent") and not parsed.date_text:
            parsed.date_text = value
        header_end = index
    body_lines = lines[header_end + 1 :] if header_end >= 0 else lines
    parsed.body = "\n".join(line for line in body_lines if not _HEADER_RE.match(line)).strip()
    if parsed.date_text:
        parsed.date = _email_date(parsed.date_text, today)
    # "Friday" in an email means the Friday after it was sent, not after it was pasted.
    reference = parsed.date or today
    parsed.dates = find_dates(parsed.body, reference)
    parsed.actions = _actions(parsed.body)
    return parsed


def _date_mentions(body: str, dates: list[tuple[str, date]]) -> list[dict[str, object]]:
    """The dates found, for the ``email.received`` event, each marked when it reads as a deadline."""
    mentions = []
    for phrase, day in dates:
        at = body.find(phrase)
        deadline = at >= 0 and bool(_DEADLINE_BEFORE_RE.search(body[max(0, at - 40) : at]))
        mentions.append({"text": phrase, "day": day.isoformat(), "deadline": deadline})
    return mentions


def _sender_label(sender: str) -> str:
    name, address = parseaddr(sender)
    if name and address:
        return f"{name} <{address}>"
    return address or name or sender or "unknown sender"


def _today(ctx: ToolContext) -> date:
    return local_now(ctx.now(), ctx.extra.get("timezone", "UTC")).date()


def _current_message_text(ctx: ToolContext) -> str:
    message = ctx.store.get(ctx.scope, ctx.message_id) if ctx.message_id is not None else None
    if message is None:
        raise ValueError("no current message to keep; pass the email as text")
    return _ADDRESS_RE.sub("", message.text, count=1)


class KeepEmailArgs(BaseModel):
    text: str | None = Field(None, description="the email; omit to keep the person's current message")


class ListEmailsArgs(BaseModel):
    limit: int = Field(10, ge=1, le=50)


class EmailIdArgs(BaseModel):
    id: int


class DraftReplyArgs(BaseModel):
    email_id: int | None = None
    body: str


# Example utterances per tool: the embedded model picks its tool from them, and the ones
# with arguments are the demonstrations it writes arguments from (hosted models never see them).
@tool(
    examples=(
        "here is an email I got: From: Anna Subject: Q2 report",
        "From: billing@example.com Subject: Invoice Date: Tue, 30 Apr Dear customer",
        "Subject: Re: contract Dear Mr Smith, please sign by Friday. Kind regards",
        "Fwd: meeting next week",
        "---------- Forwarded message --------- From: HR",
        "Hi, please send me the slides before the meeting. Thanks, Ram",
        "Dear team, the office is closed on Monday. Best regards",
        'Hello Maria, the invoice for March is attached. Please pay it by the 15th. Regards, Tom',
        'From: Lena Fischer <lena@example.org> Subject: Workshop Hi, can you confirm the room by Wednesday?',
        'Subject: Dentist appointment Your appointment is on Tuesday at 10:00. Reply to confirm.',
        "here's a mail from my boss: Please finish the slides by Thursday. Thanks, Mark",
        'Fw: your order has shipped',
        'Hallo Jonas, kannst du mir bis Freitag die Unterlagen schicken? Viele Grüße, Petra',
        'Von: Klaus Betreff: Termin Hallo, passt dir Donnerstag um 14 Uhr?',
        "De : Sophie Objet : Réunion Bonjour, peux-tu m'envoyer le compte rendu avant lundi ? Merci",
        'De: Carlos Asunto: Factura Hola, te envío la factura, por favor págala antes del viernes. Saludos',
    )
)
def keep_email(ctx: ToolContext, args: KeepEmailArgs) -> str:
    """Keep an email and extract sender, subject, dates and action items."""
    # Letting the tool read the stored message spares the model from copying a long email
    # into its arguments (output tokens, and a chance to alter it).
    text = args.text if args.text and args.text.strip() else _current_message_text(ctx)
    parsed = parse_email(text, _today(ctx))
    meta = {
        "from": parsed.sender,
        "to": parsed.to,
        "date": parsed.date.isoformat() if parsed.date else parsed.date_text,
        "dates": [[phrase, day.isoformat()] for phrase, day in parsed.dates],
        "actions": parsed.actions,
    }
    with ctx.transaction():
        item = memory.add_vault_item(
            ctx.store,
            ctx.scope,
            EMAIL,
            text.strip(),
            title=parsed.subject or "(no subject)",
            meta=meta,
            agent=NAME,
            source_message=ctx.message_id,
            now=ctx.now(),
        )
        payload = {
            "email_id": item.number,
            "sender": _sender_label(parsed.sender),
            "subject": item.title,
            "dates": _date_mentions(parsed.body, parsed.dates),
        }
        ctx.emit("email.received", payload, agent=NAME)
    lines = [
        f"Kept email #{item.number}.",
        f"From: {_sender_label(parsed.sender)}",
        f"Subject: {parsed.subject or '(none)'}",
    ]
    if parsed.date or parsed.date_text:
        lines.append(f"Sent: {format_date(parsed.date) if parsed.date else parsed.date_text}")
    if parsed.dates:
        lines.append("Dates: " + "; ".join(f"{phrase} = {format_date(day)}" for phrase, day in parsed.dates))
    lines.append("Action items:" if parsed.actions else "Action items: none found")
    lines.extend(f"- {action}" for action in parsed.actions)
    return "\n".join(lines)


@tool(
    examples=(
        "show my emails", "list the mails I forwarded", "what emails do I have", "which emails did I keep",
        "any mails saved?", "list everything in my inbox", "Zeig meine E-Mails", "Quels courriels ai-je gardés ?",
        "what's in my inbox",
        'list my emails',
        'show the emails I kept',
        'how many emails have I saved',
        'Welche E-Mails habe ich?',
        'Montre mes e-mails',
        'Muéstrame mis correos',
    ),
    keywords=('show', 'list', 'which', 'any', 'inbox', 'zeig', 'quels', 'muestra'),
)
def list_emails(ctx: ToolContext, args: ListEmailsArgs) -> str:
    """List kept emails, newest first."""
    items = memory.list_vault_items(ctx.store, ctx.scope, EMAIL, limit=args.limit)
    if not items:
        return "No emails kept."
    return "\n".join(
        f"#{item.number} {item.meta.get('date', '')} {_sender_label(item.meta.get('from', ''))}: {item.title}".replace("  ", " ")
        for item in items
    )


@tool(
    examples=(
        ("read email 2", {"id": 2}),
        ("open email 5", {"id": 5}),
        "what did the last email say",
        "show me that mail again",
        'what did Anna write',
        'open the email from the bank',
        "read me the landlord's mail",
        'show email number 3',
        'Lies die Mail von Anna',
        'read the email from Tom',
        "what did the bank's email say",
        'show the whole email from HR',
        'open the last mail',
        'Zeig mir die E-Mail von der Bank',
        'Lis le mail de Sophie',
        'Lee el correo de Carlos',
    ),
    keywords=('read', 'open', 'say', 'said', 'write', 'wrote', 'lies', 'lis', 'lee'),
)
def read_email(ctx: ToolContext, args: EmailIdArgs) -> str:
    """Read a kept email."""
    # Emails are numbered among emails (drafts among drafts): email #1 is the first one kept.
    item = memory.vault_item_by_number(ctx.store, ctx.scope, EMAIL, args.id)
    if item is None:
        return f"No email #{args.id}; call list_emails."
    body = item.body if len(item.body) <= _READ_CHARS else item.body[:_READ_CHARS] + "\n[cut]"
    return f"Email #{item.number}: {item.title}\nFrom: {_sender_label(item.meta.get('from', ''))}\n{body}"


@tool(
    examples=(
        ("draft a reply saying I'll send it friday", {"body": "I'll send it friday"}),
        ("reply to email 3 that I accept the offer", {"email_id": 3, "body": "I accept the offer"}),
        ("answer Ram that the contract is on its way", {"body": "the contract is on its way"}),
        "write a polite answer declining the invitation",
        "reply to the landlord's email",
        "draft an answer to that mail",
        'write Anna a reply saying thanks',
        "reply to the bank that I'll call them",
        'tell the landlord in a reply that Monday is fine',
        'draft a short answer to Tom: see you there',
        'Antworte Anna, dass ich komme',
        "Réponds à Paul que c'est d'accord",
        'draft a reply to Lena that Wednesday works',
        'respond to the HR mail saying I agree',
        'Schreib Petra eine Antwort: die Unterlagen kommen morgen',
        'Responde a Carlos que ya pagué la factura',
    ),
    keywords=('reply', 'answer', 'draft', 'respond', 'antworte', 'réponds', 'responde'),
)
def draft_reply(ctx: ToolContext, args: DraftReplyArgs) -> str:
    """Save a reply draft for the person to send; nothing is sent."""
    to, subject = "", "Re:"
    if args.email_id is not None:
        original = memory.vault_item_by_number(ctx.store, ctx.scope, EMAIL, args.email_id)
        if original is None:
            return f"No email #{args.email_id}; call list_emails."
        to = original.meta.get("from", "")
        subject = "Re: " + re.sub(r"^(?:(?:re|fwd?|aw|wg)\s*:\s*)+", "", original.title, flags=re.IGNORECASE)
    with ctx.transaction():
        item = memory.add_vault_item(
            ctx.store,
            ctx.scope,
            DRAFT,
            args.body.strip(),
            title=subject,
            meta={"reply_to": args.email_id, "to": to},
            agent=NAME,
            source_message=ctx.message_id,
            now=ctx.now(),
        )
        payload = {"draft_id": item.number, "to": _sender_label(to) if to else "", "subject": subject, "reply_to": args.email_id}
        ctx.emit("draft.saved", payload, agent=NAME)
    head = f"Draft #{item.number} saved (not sent).\nTo: {_sender_label(to) if to else '(fill in)'}\nSubject: {subject}"
    return f"{head}\n\n{item.body}"


agent = AgentSpec(
    name=NAME,
    description="Email: keep pasted or forwarded emails, extract sender, dates and action items, draft replies.",
    instructions=(
        "When the person pastes or forwards an email, call keep_email without text, then summarise "
        "sender, subject, dates and action items. Drafts are saved with draft_reply and shown in full; "
        "you cannot send email, so never say you sent one."
    ),
    examples=(
        "here is an email I got: From: Anna Subject: Q2 report",
        "From: billing@example.com Subject: Invoice Date: Tue, 30 Apr Dear customer",
        "Subject: Re: contract Dear Mr Smith, ... Kind regards",
        "Fwd: meeting next week",
        "---------- Forwarded message --------- From: HR",
        "what did the last email say",
        "show my emails",
        "list the mails I forwarded",
        "what does Anna want in her email",
        "any action items in that email",
        "draft a reply saying I'll send it friday",
        "write a polite answer declining the invitation",
        "reply to the landlord's email",
        "when is the deadline in the email from HR",
        # The same requests in other languages: their words and character n-grams find
        # this agent when a message has no English in it (one per language; tests use others).
        "Hier ist eine weitergeleitete Mail von der Bank, fass sie zusammen",
        "Voici un courriel de la banque, résume-le",
        "Aquí tienes un correo del banco, resúmelo",
        "Вот письмо из банка, кратко перескажи",
        "銀行からのメールを要約して",
        "बैंक से आया यह ईमेल पढ़कर सारांश दो",
        "هذه رسالة من البنك، لخصها",
    ),
    keywords=(
        "email", "mail", "e-mail", "inbox", "reply", "forward", "fwd", "subject", "sender", "dear", "regards",
        "betreff", "antwort", "courriel", "objet", "réponse", "correo", "asunto", "respuesta", "письмо", "почта", "ответ", "メール", "件名", "返信", "ईमेल", "विषय", "بريد", "رسالة",
    ),
    tools=(keep_email, list_emails, read_email, draft_reply),
    emits=("email.received", "draft.saved"),
    # Whether a deadline from an email already became a task or a reminder.
    interests=("task.created", "task.done", "reminder.set"),
    collaborators=("tasks", "reminders"),
)
