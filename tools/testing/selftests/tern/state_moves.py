#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Compare the state moves the messenger holds (debugfs tern/moves: a
# line per state, "KIND STATE: NEXT...") with the tables of design.rst's
# "Lane and session states" (first column the state, second the states
# it moves to, remarks in brackets). Every pair of states counts, legal
# and illegal: a move the code allows and the page does not, or the
# reverse, is printed and fails the run.
"""usage: state_moves.py DESIGN.rst MOVES"""
import re
import sys


def without_remarks(text):
    """@text without what is in brackets, nested ones included."""
    out, depth = "", 0
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif not depth:
            out += c
    return out


def doc_tables(path):
    lines = open(path).read().split("\n")
    tables = {}
    i = 0
    while i < len(lines):
        m = re.match(r"^(lane|session)\s+moves to\s*$", lines[i])
        if not m:
            i += 1
            continue
        kind = m.group(1)
        border = lines[i - 1]
        col = border.index(" ", border.index("=")) + 2
        rows = []
        i += 2
        while i < len(lines) and not lines[i].startswith("="):
            first, second = lines[i][:col].strip(), lines[i][col:].strip()
            if first:
                rows.append([first.split()[0], second])
            elif rows:
                rows[-1][1] += " " + second
            i += 1
        moves = {}
        for state, text in rows:
            text = without_remarks(text)
            moves[state] = set(w.strip() for w in text.split(",")
                               if w.strip() and w.strip() != "nothing")
        tables[kind] = moves
    return tables


def code_tables(path):
    tables = {}
    for line in open(path):
        head, _, rest = line.partition(":")
        kind, state = head.split()
        tables.setdefault(kind, {})[state] = set(rest.split())
    return tables


def main():
    doc, code = doc_tables(sys.argv[1]), code_tables(sys.argv[2])
    bad = 0
    for kind in ("lane", "session"):
        states = sorted(set(code.get(kind, {})) | set(doc.get(kind, {})))
        if not code.get(kind) or not doc.get(kind):
            print("no %s table in %s" % (kind, "the code" if not
                                         code.get(kind) else "design.rst"))
            bad += 1
            continue
        pairs = legal = 0
        for a in states:
            for b in states:
                pairs += 1
                in_code = b in code[kind].get(a, set())
                in_doc = b in doc[kind].get(a, set())
                legal += in_code
                if in_code != in_doc:
                    print("%s %s -> %s: the code %s it, design.rst %s" %
                          (kind, a, b, "allows" if in_code else "refuses",
                           "allows" if in_doc else "does not"))
                    bad += 1
        print("%s: %d states, %d pairs, %d legal moves" %
              (kind, len(states), pairs, legal))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
