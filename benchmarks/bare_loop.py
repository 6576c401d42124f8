"""A bare FCFS / EASY loop: the floor `isthmus simulate` is measured against.

Reads an SWF file (plain or gzip), keeps jobs with positive size and runtime, and simulates
strict FCFS or EASY backfilling on one cluster with isthmus's same-instant rule (completions,
then arrivals, then one round); estimates are requested times (the runtime when absent).
Prints the job count and the mean wait, which must equal isthmus's for the same input.
Run: python benchmarks/bare_loop.py FILE PROCESSORS fcfs|easy
"""

import gzip
import heapq
import sys


def main(path: str, procs: int, policy: str) -> None:
    """Simulate and print `jobs mean_wait`."""
    opener = gzip.open if path.endswith(".gz") else open
    jobs: list[tuple[float, int, float, float]] = []  # (submit, size, runtime, estimate)
    with opener(path, "rt") as fh:
        for line in fh:
            f = line.split()
            if not f or f[0].startswith(";"):
                continue
            size = int(f[4]) if int(f[4]) > 0 else int(f[7])
            submit, runtime, req = float(f[1]), float(f[3]), float(f[8])
            if size <= 0 or runtime <= 0 or size > procs:
                continue
            jobs.append((submit, size, runtime, req if req > 0 else runtime))
    jobs.sort(key=lambda j: j[0])
    queue: list[tuple[float, int, float, float]] = []
    running: list[tuple[float, float, int]] = []  # (end, estimated end, size), a heap
    free, waits, i, n = procs, 0.0, 0, len(jobs)
    while i < n or queue or running:
        now = min(jobs[i][0] if i < n else float("inf"), running[0][0] if running else float("inf"))
        while running and running[0][0] <= now:
            free += heapq.heappop(running)[2]
        while i < n and jobs[i][0] <= now:
            queue.append(jobs[i])
            i += 1
        k = 0
        while k < len(queue):
            s, size, rt, est = queue[k]
            if size <= free:
                free -= size
                waits += now - s
                heapq.heappush(running, (now + rt, now + est, size))
                queue.pop(k)
                continue
            if policy == "fcfs" or k > 0:
                if policy == "fcfs":
                    break
                k += 1
                continue
            # EASY: the head's reservation (shadow time and processors spare then), then backfill
            avail, shadow = free, float("inf")
            for _end, est_end, sz in sorted(running, key=lambda r: r[1]):
                if est_end > shadow:
                    break
                avail += sz  # every job ending by the shadow time frees its processors then
                if shadow == float("inf") and avail >= size:
                    shadow = est_end
            extra, shadow = avail - size, max(shadow, now)
            k = 1
            while k < len(queue):
                s2, sz2, rt2, est2 = queue[k]
                if sz2 <= free and (now + est2 <= shadow or sz2 <= extra):
                    free -= sz2
                    waits += now - s2
                    if now + est2 > shadow:
                        extra -= sz2
                    heapq.heappush(running, (now + rt2, now + est2, sz2))
                    queue.pop(k)
                else:
                    k += 1
            break
    print(n, waits / n if n else 0.0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
