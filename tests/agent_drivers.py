"""One driver per real agent CLI: what the contract suite (tests/test_real_agents.py) needs to know about it.

A driver says how to install the CLI (tests/realtools.py, pinned), how a user sets it up against an
OpenAI/Anthropic/Gemini-compatible endpoint (here: the scripted model on 127.0.0.1) in the test's HOME, and the
CLI's own words for what the contract checks (a refused key, a refused escape). Everything else, the behaviour
every CLI must show through git-nerve, is written once in the contract suite; a CLI's own module
(tests/test_real_<cli>.py) keeps only what is specific to it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from git_nerve.demo.scripted_model.server import API_KEY, MODEL, ScriptedModel
from git_nerve.workflow.adapters import claude, codex, copilot, gemini, qwen
from tests.real_agents import agent_env
from tests.realtools import npm_tool, pip_tool


@dataclass(frozen=True)
class Driver:
    name: str  #: the adapter's name (`--adapter NAME`)
    install: Callable[[], Path]  #: the CLI's executable, installed at its pinned version
    setup: Callable[[Path, ScriptedModel, str], dict[str, str]]  #: (bin, model, key) -> the run's environment
    marker: str  #: a word of the running agent's command line (to find its processes)
    key_words: tuple[str, ...]  #: what a refused key's one-line detail names (the CLI's words, the variable)
    #: the CLI's own words for a refused escape, in the coder's tool results (None: the CLI has no refusal of its
    #: own to show, e.g. aider, whose adapter answers its questions; its module checks what it does instead)
    refused: Callable[[list[str]], bool] | None = None
    apt_confined: bool = False  #: apt-get may run, confined by an OS sandbox (its output is then expected)
    timeout: int = 15  #: the adapter timeout the hang test sets
    timeout_limit: float = 60  #: the whole run ends within this many seconds after a hang
    stop_limit: float = 15  #: a stop ends the run within this many seconds
    key_var: str | None = None  #: the credential `git nerve validate` checks (None: no validate contract)
    hooks_run: bool = False  #: the CLI's shell runs git's hooks: the post-commit hook records the commit
    stop_mode: str = "hang"  #: "hang": the model holds the request; "slow": the agent runs `sleep 30`
    keeps_output: bool = False  #: a timeout's detail always carries the CLI's last output
    reports_usage: bool = True  #: the CLI prints what its model calls used (issue 39; hermes -z prints nothing)


def _claude(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own Claude Code setup: an API key and a base URL (a gateway)."""
    return agent_env(bin_path, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=model.url)


def _gemini(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own Gemini setup: an API key and a base URL (a proxy), settings in ~/.gemini."""
    _write_json(".gemini/settings.json", {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "model": {"name": MODEL},
    })
    return agent_env(bin_path, GEMINI_API_KEY=key, GOOGLE_GEMINI_BASE_URL=model.url)


def _qwen(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own Qwen Code setup: an OpenAI-compatible provider."""
    _write_json(".qwen/settings.json", {"security": {"auth": {"selectedType": "openai"}}})
    return agent_env(bin_path, OPENAI_API_KEY=key, OPENAI_BASE_URL=f"{model.url}/v1", OPENAI_MODEL=MODEL)


def _codex(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own Codex configuration: a provider on the scripted model (Responses API), its key variable."""
    codex_home = _home() / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "nerve"\n\n[model_providers.nerve]\nname = "nerve"\n'
        f'base_url = "{model.url}/v1"\nenv_key = "NERVE_TEST_OPENAI_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )
    return agent_env(bin_path, CODEX_HOME=str(codex_home), NERVE_TEST_OPENAI_KEY=key)


def _aider(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own aider setup: an OpenAI-compatible endpoint and key, the model by name."""
    return agent_env(bin_path, OPENAI_API_BASE=f"{model.url}/v1", OPENAI_API_KEY=key, AIDER_MODEL=f"openai/{MODEL}")


def _hermes(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own Hermes setup: a custom OpenAI-compatible provider in ~/.hermes/config.yaml."""
    config = _home() / ".hermes" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "model:\n"
        "  provider: custom\n"
        f"  base_url: {model.url}/v1\n"
        f"  default: {MODEL}\n"
        f"  api_key: {key}\n"
    )
    return agent_env(bin_path)


def _opencode(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own opencode setup: an OpenAI-compatible provider whose key comes from a variable."""
    _write_json(".config/opencode/opencode.json", {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"nerve": {
            "npm": "@ai-sdk/openai-compatible", "name": "Nerve scripted",
            "options": {"baseURL": f"{model.url}/v1", "apiKey": "{env:NERVE_SCRIPTED_KEY}"},
            "models": {MODEL: {"name": MODEL}},
        }},
        "model": f"nerve/{MODEL}",
        "small_model": f"nerve/{MODEL}",
    })
    return agent_env(bin_path, NERVE_SCRIPTED_KEY=key)


def _copilot(bin_path: Path, model: ScriptedModel, key: str) -> dict[str, str]:
    """The user's own Copilot CLI setup: BYOK, an OpenAI-compatible provider (no GitHub login needed)."""
    return agent_env(bin_path, COPILOT_PROVIDER_BASE_URL=f"{model.url}/v1", COPILOT_PROVIDER_TYPE="openai",
                     COPILOT_PROVIDER_API_KEY=key, COPILOT_MODEL=MODEL)


def _saying(*words: str, lower: bool = False) -> Callable[[list[str]], bool]:
    """Any of ``words`` in the tool results (case-folded with ``lower``)."""
    def check(results: list[str]) -> bool:
        text = "\n".join(results)
        text = text.lower() if lower else text
        return any(w in text for w in words)
    return check


def _home() -> Path:
    return Path(os.environ["HOME"])


def _write_json(rel: str, data: dict) -> None:
    path = _home() / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


DRIVERS: dict[str, Driver] = {d.name: d for d in (
    Driver("claude", lambda: npm_tool("@anthropic-ai/claude-code", claude.TESTED_VERSION, "claude"), _claude, "claude",
           key_words=("Invalid API key", "ANTHROPIC_API_KEY"),
           refused=lambda results: len([r for r in results if "denied" in r]) >= 4,  # each of the 4 attempts
           key_var="ANTHROPIC_API_KEY", hooks_run=True),
    Driver("gemini", lambda: npm_tool("@google/gemini-cli", gemini.TESTED_VERSION, "gemini"), _gemini, "gemini",
           key_words=("API key not valid", "GEMINI_API_KEY"), refused=_saying("denied by policy"), keeps_output=True,
           key_var="GEMINI_API_KEY", hooks_run=True),
    Driver("qwen", lambda: npm_tool("@qwen-code/qwen-code", qwen.TESTED_VERSION, "qwen"), _qwen, "qwen",
           key_words=("OPENAI_API_KEY",), refused=_saying("denied by permission rules", "permission was declined"),
           key_var="OPENAI_API_KEY", hooks_run=True),
    Driver("codex", lambda: npm_tool("@openai/codex", codex.TESTED_VERSION, "codex"), _codex, "codex",
           key_words=("the API key was rejected",), refused=_saying("Read-only file system"), apt_confined=True,
           stop_limit=25, stop_mode="slow", keeps_output=True),
    Driver("aider", lambda: pip_tool("aider-chat", "0.86.2", "aider"), _aider, "nerve_aider",
           key_words=("refused the key", "AuthenticationError"), timeout=20, timeout_limit=90),
    Driver("hermes", lambda: pip_tool("hermes-agent", "0.19.0", "hermes"), _hermes, "hermes",
           key_words=("Incorrect API key", "api_key"),
           refused=lambda results: all(w in "\n".join(results) for w in ("approvals.deny", "HERMES_WRITE_SAFE_ROOT")),
           timeout=25, reports_usage=False,
           timeout_limit=90),
    Driver("copilot", lambda: npm_tool("@github/copilot", copilot.TESTED_VERSION, "copilot"), _copilot, "copilot",
           key_words=("Authentication failed", "COPILOT_PROVIDER_API_KEY"), refused=_saying("Permission denied"),
           key_var=None, hooks_run=True, timeout=25, timeout_limit=90),
    Driver("opencode", lambda: npm_tool("opencode-ai", "1.18.33", "opencode"), _opencode, "opencode",
           key_words=("Incorrect API key", "key"), refused=_saying("rule", "denied", "reject", lower=True), timeout=25,
           timeout_limit=90),
)}


def env_for(driver: Driver, bin_path: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    return driver.setup(bin_path, model, key)
