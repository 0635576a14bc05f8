"""What waits for a person: approvals, checkpoints, tasks on hold, rejected mission files.

Each kind of thing that waits is one *source* (:mod:`polpo.attention.sources`): a pure function from the stored
rows it reads to :class:`~polpo.attention.items.Item`\\ s, each saying what to do and the command (and the web
view's button) that does it. :func:`~polpo.attention.items.gather` runs them all; ``polpo status``, ``GET
/api/attention``, the web view and the channels' ``attention:digest`` show the same list.
"""
