"""Floor 2: the `git worker` lifecycle.

* :mod:`.states`: the transition table (pure).
* :mod:`.ids`: task id rules (pure).

* :mod:`.transitions`: compare-and-set state changes on the bus.
* :mod:`.settings`: nerve.* git config, the integration branch and remote.
* :mod:`.lifecycle`: spawn, start, done, review, merge, cancel, retry (a package, one module per seam).
* :mod:`.locking`: the fetch lock and a task's lock (below lifecycle and merged).
* :mod:`.status`: staleness and the dashboard rows.
"""
