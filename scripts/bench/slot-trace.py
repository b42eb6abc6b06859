"""Reads a `perf trace` of one one-slot agent (scripts/bench/slot-trace.sh) and prints the
medians (q25-q75), in ms, of: a task's exit (the agent's group SIGKILL once its leader is
reaped) -> the next datagram sent (the `Completed` report); the next datagram received
after it (the `Launch`) -> the next `clone3`; and exit -> that `clone3`."""
import re
import statistics
import sys

LINE = re.compile(r"\s*([\d.]+) \(\s*[\d.]*\s*(?:ms)?\): \S+ (\w+)\((.*)")


def events(path):
    found = []
    for line in open(path):
        match = LINE.match(line)
        if match and "continued" not in line:
            found.append((float(match.group(1)), match.group(2), match.group(3).rstrip()))
    return sorted(found)


def after(evs, start, name, received=False):
    for i in range(start + 1, len(evs)):
        if evs[i][1] == name and (not received or evs[i][2].endswith("= 1")):
            return i
    return None


def summary(values):
    if len(values) < 3:
        return f"n={len(values)} {values}"
    q = statistics.quantiles(values, n=4)
    return f"n={len(values)} median {statistics.median(values):.3f} ({q[0]:.3f}-{q[2]:.3f})"


def main(path):
    evs = events(path)
    report, launch, cycle = [], [], []
    for i, (t, name, args) in enumerate(evs):
        if name != "kill" or "KILL" not in args:
            continue
        sent = after(evs, i, "sendmsg")
        if sent is None:
            continue
        report.append(evs[sent][0] - t)
        received = after(evs, sent, "recvmmsg", received=True)
        clone = received is not None and after(evs, received, "clone3")
        if clone:
            launch.append(evs[clone][0] - evs[received][0])
            cycle.append(evs[clone][0] - t)
    print("  exit -> Completed sent:    ", summary(report))
    print("  Launch received -> clone3: ", summary(launch))
    print("  exit -> clone3:            ", summary(cycle))


if __name__ == "__main__":
    main(sys.argv[1])
