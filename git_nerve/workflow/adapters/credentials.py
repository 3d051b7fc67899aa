"""Each agent gets only its own credentials (issue 41).

The environment an adapter's process receives holds the general variables (:data:`GENERAL`,
:data:`GENERAL_PREFIXES`: PATH, HOME, locale, terminal, proxies, CA bundles, git's identity, git-nerve's own)
and the variables its adapter declares (``env_names``: its API key, base URL, state directory; a trailing ``*``
is a prefix), plus any named by ``--api-key-env NAME`` in its extra arguments and those nerve.toml or the
workflow set on the adapter itself. Everything else (another provider's key, a cloud token) is left out. An
adapter that declares nothing (``env_names`` None: any command through ``create_exec``) gets everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

GENERAL = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "NO_COLOR",
    "FORCE_COLOR", "CLICOLOR", "TMPDIR", "PWD", "EDITOR", "VISUAL", "PAGER", "HOSTNAME", "VIRTUAL_ENV",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
})
GENERAL_PREFIXES = ("LC_", "XDG_", "NERVE_", "GIT_", "PYTHON", "NODE_", "COVERAGE_")


def allowed(name: str, declared: Iterable[str]) -> bool:
    """True when an adapter declaring ``declared`` receives the variable ``name``."""
    if name in GENERAL or name.startswith(GENERAL_PREFIXES):
        return True
    for pattern in declared:
        if pattern.endswith("*") and name.startswith(pattern[:-1]) or name == pattern:
            return True
    return False


def declared(env_names: Sequence[str] | None, extra_args: Sequence[str] | None) -> list[str] | None:
    """What an adapter declares: its ``env_names`` and a ``--api-key-env NAME`` of its extra arguments."""
    if env_names is None:
        return None
    names = list(env_names)
    extra = list(extra_args or ())
    for i, arg in enumerate(extra[:-1]):
        if arg == "--api-key-env":
            names.append(extra[i + 1])
    return names


def only_own(env: Mapping[str, str], names: Sequence[str] | None, keep: Iterable[str] = ()) -> dict[str, str]:
    """``env`` without what the adapter declaring ``names`` must not receive (``keep``: set on purpose)."""
    if names is None:
        return dict(env)
    kept = set(keep)
    return {k: v for k, v in env.items() if k in kept or allowed(k, names)}


def received(env: Mapping[str, str], names: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(the variable names set in ``env`` that an adapter receives, those it is refused); names only."""
    if names is None:
        return sorted(env), []
    got = sorted(k for k in env if allowed(k, names))
    refused = sorted(k for k in env if k not in got)
    return got, refused


__all__ = ["GENERAL", "GENERAL_PREFIXES", "allowed", "declared", "only_own", "received"]
