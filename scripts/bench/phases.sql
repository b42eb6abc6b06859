-- Where a task's time went, from a master's store (sqlite3 DB < scripts/bench/phases.sql):
-- for the containers of the newest job, the mean time from a slot freeing on a node (the
-- previous container there completed) to the master allocating it again, and between the
-- container's recorded states. Allocated is stamped by the master, the other states by the
-- agents, on the same machine's clock in the benchmarks; times are whole milliseconds.
--
-- "freed -> allocated" compares two clocks (the master's runs from its start on the
-- monotonic clock, the agents' is the wall clock), which differ by a millisecond or so:
-- when a completion is stamped after the allocation it caused, the query takes an earlier
-- completion of another slot and a gap of 10-50 ms appears that no slot waited. The slot
-- turnaround is on the agent's clock alone: a node's k-th completion is paired with the
-- (k + slots)-th task started there (slots: the most containers live at once on it), so
-- its mean is exact and single gaps are right unless two slots freed together swap.
WITH s AS (SELECT id, node, allocated_ms AS alloc, acquired_ms AS acq, running_ms AS run,
    CASE WHEN state = 'completed' THEN ended_ms END AS done
  FROM containers WHERE job = (SELECT MAX(id) FROM jobs)),
g AS (SELECT s.alloc - (SELECT MAX(p.done) FROM s p WHERE p.node = s.node AND p.done <= s.alloc) AS gap
  FROM s),
live AS (SELECT node, SUM(delta) OVER (PARTITION BY node ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS n
  FROM (SELECT node, acq AS at, 1 AS delta FROM s UNION ALL SELECT node, done, -1 FROM s WHERE done IS NOT NULL)),
slots AS (SELECT node, MAX(n) AS n FROM live GROUP BY node),
ended AS (SELECT node, done, ROW_NUMBER() OVER (PARTITION BY node ORDER BY done) AS k FROM s WHERE done IS NOT NULL),
started AS (SELECT node, run, ROW_NUMBER() OVER (PARTITION BY node ORDER BY run) AS k FROM s),
turn AS (SELECT st.run - e.done AS gap FROM ended e JOIN slots n ON n.node = e.node
  JOIN started st ON st.node = e.node AND st.k = e.k + n.n)
SELECT printf('freed -> allocated %.1f ms, allocated -> acquired %.1f, acquired -> running %.1f, running -> completed %.1f',
  (SELECT AVG(gap) FROM g WHERE gap < 400), AVG(acq - alloc), AVG(run - acq), AVG(done - run))
  || COALESCE((SELECT printf('; slot turnaround (completed -> next running, agents'' clock) mean %.1f ms, p90 %d, max %d',
    AVG(gap), (SELECT gap FROM turn ORDER BY gap LIMIT 1 OFFSET (SELECT COUNT(*) * 9 / 10 FROM turn)), MAX(gap))
    FROM turn HAVING COUNT(*) > 0), '') FROM s;
