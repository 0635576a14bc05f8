"""The nemesis: real daemons, faults on a random schedule drawn from a seed, and invariants checked on the whole
history (issue 28; in the spirit of Jepsen and of FoundationDB's simulation testing).

- :mod:`.plan` — pure: a seed becomes a :class:`~.plan.Plan` (topology, workload, faults and when they heal);
  the same seed is always the same plan.
- :mod:`.faults` — the fault classes as small pieces (an action on a target), composed into a plan's faults.
- :mod:`.ledger` — the workload's agent: every run appends ``start``, a ``beat`` every half second and ``end``
  lines (task, attempt, node, pid, daemon pid) to one O_APPEND ledger; the ledger read back as runs.
- :mod:`.world` — the processes: a private PostgreSQL, one TCP proxy per node (the network the faults cut),
  each node's daemon under a supervisor that restarts it as a service manager would.
- :mod:`.invariants` — pure: each invariant from its own evidence (the ledger, every node's ``events.jsonl``,
  the store's rows, the supervisors' records of exits).
- :mod:`.run` — one seed from start to verdict, with its timeline.

``scripts/nemesis.py`` runs seeds from the command line; ``tests/nemesis/test_nemesis.py`` runs a fixed set.
docs/nemesis.md says how to read a timeline and turn a failing seed into a regression test.
"""
