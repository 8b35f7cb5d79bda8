"""redis-py (Debian's python3-redis) through slotproxy, one scenario per run.

Usage: python3 scenarios.py PORT SCENARIO. Prints "ok SCENARIO" and exits 0 when every assertion
holds; an assertion error or a redis error exits non-zero with its traceback on stderr. Every key of
a scenario carries one hash tag, so that a scenario's multi-key commands stay in one slot.
"""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
scenario = sys.argv[2]


def client():
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def pipeline():
    r = client()
    pipe = r.pipeline(transaction=False)
    for i in range(50):
        pipe.set(f"py:pipe:{i}", i)  # keys in many slots: one pipeline, replies in order
    for i in range(50):
        pipe.incrby(f"py:pipe:{i}", 100)
    pipe.get("py:pipe:7")
    pipe.delete(*[f"{{py:pipe}}:{i}" for i in range(3)])
    replies = pipe.execute()
    assert replies[:50] == [True] * 50, replies[:50]
    assert replies[50:100] == [i + 100 for i in range(50)], replies[50:100]
    assert replies[100] == b"107", replies[100]
    assert replies[101] == 0, replies[101]


def watch():
    r = client()
    other = client()
    r.set("{py:acct}:balance", 100)
    with r.pipeline() as pipe:
        pipe.watch("{py:acct}:balance")
        balance = int(pipe.get("{py:acct}:balance"))
        pipe.multi()
        pipe.set("{py:acct}:balance", balance - 30)
        pipe.rpush("{py:acct}:log", "withdraw 30")
        assert pipe.execute() == [True, 1]
    assert r.get("{py:acct}:balance") == b"70"
    # A write by another client between WATCH and EXEC: the transaction does not run.
    with r.pipeline() as pipe:
        pipe.watch("{py:acct}:balance")
        pipe.multi()
        pipe.set("{py:acct}:balance", 0)
        other.set("{py:acct}:balance", 1000)
        try:
            pipe.execute()
            raise AssertionError("EXEC ran although a WATCHed key changed")
        except redis.WatchError:
            pass
    assert r.get("{py:acct}:balance") == b"1000"


def pubsub():
    r = client()
    subscribers = []
    for _ in range(2):
        p = client().pubsub()
        p.subscribe("py:news")
        confirmation = p.get_message(timeout=5)
        assert confirmation["type"] == "subscribe", confirmation
        subscribers.append(p)
    pattern = client().pubsub()
    pattern.psubscribe("py:*")
    assert pattern.get_message(timeout=5)["type"] == "psubscribe"
    # Two channel subscribers and one pattern subscriber, as one Redis would count them.
    assert r.publish("py:news", "hello") == 3
    for p in subscribers:
        message = p.get_message(timeout=5)
        assert message["type"] == "message" and message["data"] == b"hello", message
    message = pattern.get_message(timeout=5)
    assert message["type"] == "pmessage" and message["channel"] == b"py:news", message
    for p in subscribers + [pattern]:
        p.close()


def script():
    r = client()
    incr = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert incr(keys=["{py:s}:n"], args=[5]) == 5
    # An emptied script cache: redis-py's EVALSHA fallback (or the proxy's own healing) runs it again.
    r.script_flush()
    assert incr(keys=["{py:s}:n"], args=[2]) == 7
    assert r.script_exists(incr.sha) == [True]


def blocking():
    r = client()
    r.delete("{py:q}:jobs")
    assert r.blpop(["{py:q}:jobs"], timeout=0.2) is None
    pusher = threading.Timer(0.2, lambda: client().rpush("{py:q}:jobs", "job-1"))
    pusher.start()
    started = time.monotonic()
    assert r.blpop(["{py:q}:jobs"], timeout=5) == (b"{py:q}:jobs", b"job-1")
    assert time.monotonic() - started < 4
    pusher.join()
    # Other clients are not held up by a blocked one.
    waiter = threading.Thread(target=lambda: client().blpop(["{py:q}:never"], timeout=1))
    waiter.start()
    assert r.ping() is True
    waiter.join()


SCENARIOS = {"pipeline": pipeline, "watch": watch, "pubsub": pubsub, "script": script, "blocking": blocking}

if __name__ == "__main__":
    SCENARIOS[scenario]()
    print(f"ok {scenario}")
