"""worker_kills' reading of a reply that arrived twice: the at-least-once window or a defect."""

from scopehub.eval.faults.workers import second_copies

CHAT = 700_001


def reply(number: int) -> str:
    return f"[assistant]\nre: message {number} of chat {CHAT}: tell me something"


def test_a_reply_whose_worker_died_before_recording_it_is_the_window():
    arrivals = [(CHAT, reply(0), 10.0), (CHAT, reply(0), 30.0)]
    sends = [(41, 2), (42, 0)]  # Telegram message ids, sending workers
    kills = [(2, 10.004)]  # worker 2 killed 4 ms after Telegram took message 41
    (copy,) = second_copies(arrivals, sends, kills, recorded={f"{CHAT}:42"}, chats={CHAT})
    assert copy["in_window"] and copy["kill_after_ms"] == 4 and copy["worker"] == 2


def test_a_reply_sent_again_although_recorded_is_a_defect():
    arrivals = [(CHAT, reply(0), 10.0), (CHAT, reply(0), 30.0)]
    sends = [(41, 2), (42, 0)]
    kills = [(2, 10.004)]
    (copy,) = second_copies(arrivals, sends, kills, recorded={f"{CHAT}:41"}, chats={CHAT})
    assert not copy["in_window"] and copy["first_recorded"]


def test_a_reply_sent_again_while_its_worker_lived_is_a_defect():
    arrivals = [(CHAT, reply(0), 10.0), (CHAT, reply(0), 30.0)]
    sends = [(41, 2), (42, 0)]
    kills = [(1, 10.004), (2, 31.0)]  # another worker died; worker 2 only after the second copy
    (copy,) = second_copies(arrivals, sends, kills, recorded=set(), chats={CHAT})
    assert not copy["in_window"] and copy["kill_after_ms"] is None


def test_replies_that_arrived_once_are_not_listed():
    arrivals = [(CHAT, reply(0), 10.0), (CHAT, reply(1), 11.0), (CHAT, "\u23f0 stretch", 12.0)]
    sends = [(41, 0), (42, 1), (43, 1)]
    assert second_copies(arrivals, sends, [(0, 10.5)], recorded=set(), chats={CHAT}) == []
