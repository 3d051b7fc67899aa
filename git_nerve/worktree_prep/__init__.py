"""Worktrees that are ready to work (issue 28): what a new task's worktree is given besides its tracked
files, and what is known of it afterwards.

* :mod:`.config`   ``[worktree]`` in nerve.toml
* :mod:`.include`  `.worktreeinclude` / ``include``: ignored files of the main checkout copied in
* :mod:`.clone`    ``clone_dirs``: large ignored directories, copy-on-write where the filesystem can
* :mod:`.secrets`  salted hashes of copied .env values; the pre-commit check that keeps them out of git
* :mod:`.ports`    NERVE_PORT blocks, distinct among live tasks
* :mod:`.setup`    ``setup``: the command run after the copy (:mod:`.setup_run` supervises it), its log
* :mod:`.disk`     disk_bytes, cached; :mod:`.caps` max_live / max_total_bytes
* :mod:`.prepare`  the order spawn and retry run them in; :mod:`.report` what status/show/start say
"""
