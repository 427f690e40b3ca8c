"""Transports: what normalises the outside world into an ``Inbound`` for the hub and sends
its replies back: the terminal chat, Telegram, and the Maildir inbox for programs."""
