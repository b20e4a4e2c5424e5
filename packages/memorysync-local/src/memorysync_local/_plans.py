"""API keys, tenants and plans: who is calling and what they may still write."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

PlanMode = Literal["free", "evaluation"]
DEFAULT_TENANT = "local"
EVALUATION_TENANT = "default"


@dataclass(frozen=True)
class Plan:
    """A monthly add limit and what happens past it.

    ``free`` is silent (writes answer ``skipped`` and store nothing, reads come back
    empty); ``evaluation`` answers a truthful 429 with ``retry_after``.

    >>> Plan.parse("free:100")
    Plan(mode='free', monthly_limit=100)
    """

    mode: PlanMode
    monthly_limit: int

    def __post_init__(self) -> None:
        if self.mode not in ("free", "evaluation"):
            raise ValueError(f"plan mode must be 'free' or 'evaluation', got {self.mode!r}")
        if isinstance(self.monthly_limit, bool) or not isinstance(self.monthly_limit, int):
            raise TypeError(f"monthly_limit must be an int, got {self.monthly_limit!r}")
        if self.monthly_limit < 0:
            raise ValueError(f"monthly_limit must be >= 0, got {self.monthly_limit}")

    @classmethod
    def parse(cls, spec: str) -> Plan:
        """Parse ``free:N`` or ``evaluation:N``."""
        mode, sep, limit = spec.partition(":")
        limit = limit.strip()
        if (
            not sep
            or mode not in ("free", "evaluation")
            or not limit.isascii()
            or not limit.isdigit()
        ):
            raise ValueError(f"plan must look like 'free:N' or 'evaluation:N', got {spec!r}")
        return cls(mode="free" if mode == "free" else "evaluation", monthly_limit=int(limit))


@dataclass(frozen=True)
class Caller:
    """The authenticated caller of one request. Its repr never shows the key."""

    key_id: str
    tenant_id: str
    evaluation: bool
    plan: Plan | None


def key_id(api_key: str) -> str:
    """A stable, non-reversible name for a key (what the usage table stores)."""
    return hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class KeyRing:
    """The keys configured at start: full keys (with a tenant) and evaluation keys."""

    def __init__(
        self,
        api_keys: Mapping[str, str],
        eval_keys: Iterable[str],
        plans: Mapping[str, Plan],
    ) -> None:
        callers: dict[str, Caller] = {}
        for key, tenant in api_keys.items():
            _check_key(key)
            if not isinstance(tenant, str) or not tenant.strip():
                raise ValueError("every API key needs a non-empty tenant id")
            callers[key] = Caller(key_id(key), tenant, False, plans.get(key))
        for key in eval_keys:
            _check_key(key)
            if key in callers:
                raise ValueError("a key cannot be both a full key and an evaluation key")
            callers[key] = Caller(key_id(key), EVALUATION_TENANT, True, plans.get(key))
        unknown = [k for k in plans if k not in callers]
        if unknown:
            raise ValueError(f"{len(unknown)} plan(s) name a key that is not configured")
        self._callers = callers

    def lookup(self, api_key: str) -> Caller | None:
        """The caller a key stands for; None for an unknown key."""
        return self._callers.get(api_key)

    def __repr__(self) -> str:
        return f"KeyRing(keys={len(self._callers)})"


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not key.strip():
        raise ValueError("API keys must be non-empty strings")
