-- Where a task's time went, from a master's store (sqlite3 DB < scripts/bench/phases.sql):
-- for the containers of the newest job, the mean time from a slot freeing on a node (the
-- previous container there completed) to the master allocating it again, and between the
-- container's recorded states. Allocated is stamped by the master, the other states by the
-- agents, on the same machine's clock in the benchmarks; times are whole milliseconds.
WITH s AS (SELECT c.id, c.node,
    MAX(CASE WHEN t.state = 'allocated' THEN t.at_ms END) AS alloc,
    MAX(CASE WHEN t.state = 'acquired' THEN t.at_ms END) AS acq,
    MAX(CASE WHEN t.state = 'running' THEN t.at_ms END) AS run,
    MAX(CASE WHEN t.state = 'completed' THEN t.at_ms END) AS done
  FROM containers c JOIN transitions t ON t.container = c.id
  WHERE c.job = (SELECT MAX(id) FROM jobs) GROUP BY c.id),
g AS (SELECT s.alloc - (SELECT MAX(p.done) FROM s p WHERE p.node = s.node AND p.done <= s.alloc) AS gap
  FROM s)
SELECT printf('freed -> allocated %.1f ms, allocated -> acquired %.1f, acquired -> running %.1f, running -> completed %.1f',
  (SELECT AVG(gap) FROM g WHERE gap < 400), AVG(acq - alloc), AVG(run - acq), AVG(done - run)) FROM s;
