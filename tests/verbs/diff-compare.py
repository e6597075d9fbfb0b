#!/usr/bin/env python3
"""Compares verbs-diff's output with the stock provider (STOCK) and with rxe_rs (OURS).

    diff-compare.py STOCK OURS KNOWN

Per key: both succeed or both fail; failing, the errno is the same; any other difference must be
listed in KNOWN (key pattern, stock's errno or first word, ours, reason); succeeding, every figure reported back
(caps, cqe, attributes, length) is ours >= stock, and the rest of the outcome (the use, a post's
return and completions) is identical. Prints every difference and the counts; exits 1 when any
difference is not explained.
"""
import re
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            key, _, outcome = line.rstrip("\n").partition("\t")
            rows[key] = outcome
    return rows


def load_known(path):
    known = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, stock, ours, reason = line.split(None, 3)
            known.append((re.compile(pattern), stock, ours, reason))
    return known


FIGURES = re.compile(r"^(cap|cqe|attr|length)=([0-9,]+)$")


def differs(stock, ours):
    """None when ours matches stock (figures ours >= stock), else a description."""
    s_words, o_words = stock.split(), ours.split()
    if len(s_words) != len(o_words):
        return "outcome"
    for s, o in zip(s_words, o_words):
        sm, om = FIGURES.match(s), FIGURES.match(o)
        if sm and om and sm.group(1) == om.group(1):
            sv, ov = sm.group(2).split(","), om.group(2).split(",")
            if len(sv) != len(ov) or any(int(b) < int(a) for a, b in zip(sv, ov)):
                return f"{sm.group(1)} smaller"
        elif s != o:
            return "outcome"
    return None


def head(outcome):
    """What KNOWN names of an outcome: the errno of "err N", else its first word (rc=N)."""
    return outcome[4:] if outcome.startswith("err ") else outcome.split()[0]


def main():
    stock, ours, known = load(sys.argv[1]), load(sys.argv[2]), load_known(sys.argv[3])
    if list(stock) != list(ours):
        print(f"the two runs swept different combinations ({len(stock)} and {len(ours)})")
        return 1
    same = explained = 0
    unexplained = []
    for key, s in stock.items():
        o = ours[key]
        if s == o:
            same += 1
            continue
        hit = next((k for k in known if k[0].search(key) and k[1] == head(s) and k[2] == head(o)), None)
        if hit:
            explained += 1
            continue
        if s.startswith("err ") == o.startswith("err ") and not s.startswith("err ") and differs(s, o) is None:
            same += 1
            continue
        unexplained.append(f"  {key}\n    stock: {s}\n    ours:  {o}")
    print(f"{len(stock)} combinations: {same} the same, {explained} with a known difference, "
          f"{len(unexplained)} unexplained differences")
    for u in unexplained[:200]:
        print(u)
    if len(unexplained) > 200:
        print(f"  ... and {len(unexplained) - 200} more")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
