"""The conflict radar: which live workers would collide with each other or with the integration branch.

``scan`` computes it (pairs whose inputs changed only), ``cache`` keeps the
result with its age in ``<git-common-dir>/nerve/radar.json``, ``notify``
tells both agents of a new conflict (a thread round, a notice the next hook
message shows), ``background`` is what a commit starts without waiting.
"""
