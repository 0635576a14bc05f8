"""Git, run as the real ``git`` program: the async runner (:mod:`.git`) and worktree/branch operations
(:mod:`.worktrees`) that per-task isolation and change tracking are built on."""
