#!/usr/bin/env python3
"""DRESS Figure 1: is there any schedule with the paper's DRESS figures (makespan 30 s,
mean wait 5.75 s) once the job sizes reproduce its FCFS figures (waits 0, 9, 28, 27 s,
makespan 40 s)? Six containers, four jobs submitted at 0, 1, 2, 3 s, Job 1 R3 L10.

    scripts/dress-figure1-search.py      # a few minutes; prints every schedule it finds

Tries every R2..R4 <= 6 and L2..L4 <= 20 whose gang-start FCFS (no job passes an
earlier one) gives the paper's FCFS figures, then every integer schedule (starts up to
30 s) that fits in six containers, ends at 30 s, waits 23 s in all, and in which no job
could have started a second earlier. docs/experiments/dress.md reports the answer.
"""
import itertools

CONTAINERS = 6
SUBMITTED = [0, 1, 2, 3]
JOB_1 = (3, 10)


def fcfs(sizes, lengths):
    """(waits, makespan) under gang-start FCFS, one-second steps."""
    start = [None] * 4
    t, nxt = 0, 0
    while nxt < 4:
        used = sum(sizes[i] for i in range(4) if start[i] is not None and start[i] + lengths[i] > t)
        while nxt < 4 and SUBMITTED[nxt] <= t and used + sizes[nxt] <= CONTAINERS:
            start[nxt] = t
            used += sizes[nxt]
            nxt += 1
        t += 1
    return [start[i] - SUBMITTED[i] for i in range(4)], max(start[i] + lengths[i] for i in range(4))


def fits(sizes, lengths, starts):
    """Whether the schedule never uses more than the cluster's containers."""
    return all(
        sum(sizes[i] for i in range(4) if starts[i] <= t < starts[i] + lengths[i]) <= CONTAINERS
        for t in range(60)
    )


def no_needless_delay(sizes, lengths, starts):
    """No job could have started a second earlier, the others unchanged."""
    for i in range(4):
        if starts[i] > SUBMITTED[i]:
            earlier = list(starts)
            earlier[i] -= 1
            if fits(sizes, lengths, earlier):
                return False
    return True


def main():
    consistent, found = 0, 0
    for rest in itertools.product(range(1, CONTAINERS + 1), repeat=3):
        for rest_lengths in itertools.product(range(1, 21), repeat=3):
            sizes, lengths = [JOB_1[0], *rest], [JOB_1[1], *rest_lengths]
            if fcfs(sizes, lengths) != ([0, 9, 28, 27], 40):
                continue
            consistent += 1
            for starts in itertools.product(*[range(SUBMITTED[i], 31) for i in range(4)]):
                if starts[0] != 0 or max(starts[i] + lengths[i] for i in range(4)) != 30:
                    continue
                if sum(starts[i] - SUBMITTED[i] for i in range(4)) != 23:
                    continue
                if fits(sizes, lengths, starts) and no_needless_delay(sizes, lengths, starts):
                    found += 1
                    print("sizes", sizes, "lengths", lengths, "starts", starts)
    print(f"size sets reproducing FCFS: {consistent}; schedules with makespan 30 s and mean wait 5.75 s: {found}")


if __name__ == "__main__":
    main()
