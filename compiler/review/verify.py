"""``prefixlock verify``: replay scenarios and check every invariant, per provider.

Each scenario is replayed once in process (and its calls serialized for every chosen
provider), once with a restart before every step, and once by ``prefixlock replay`` in a
subprocess under another ``PYTHONHASHSEED``, ``TZ`` and ``LC_ALL``; the checks are those
of :mod:`prefixlock.review.invariants` (prefix, root, context, duplicate, retry, compaction) plus
**restart** and **hash seed**: both other replays must be byte-identical.

A failure names the scenario, provider, call, the first divergent JSON path with old and
new values, and the spec ``file:line`` that produced the text when it can be found
(:class:`prefixlock.review.sources.SourceIndex`). The table reports per scenario and provider:
calls, distinct request-context messages, prefix stability, the share of body bytes
equal to the previous body's prefix, and the simulated cached-token share and cost vs
no caching (:mod:`prefixlock.cache.simulator`). The golden suite runs in a few seconds: the
subprocess replays run in parallel with the in-process work.

Exit codes: 0 every invariant holds, 1 a failure, 2 a usage or input error.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs

from ..cache.simulator import simulate
from ..cache.tokens import get_tokenizer
from ..core.errors import UsageError
from ..core.messages import MessageKind
from ..core.resources import python_module_command
from . import processes
from .invariants import Failure, check_bodies, check_history, same_bytes
from .jsondiff import common_prefix
from .replay import Call, provider_names, replay, replay_bodies, serialize_calls
from .scenario import Scenario, golden_scenarios, load_scenario, scenario_files
from .sources import SourceIndex
from .tables import align

__all__ = [
    "Report",
    "Row",
    "scenario_label",
    "verify",
    "verify_scenario",
]

#: Environment of the hash-seed replay: another seed, time zone and locale.
OTHER_TZ = "Asia/Kathmandu"  # UTC+05:45: an offset no default shares
OTHER_LOCALE = "C"


@attrs.frozen
class Row:
    """One scenario x provider line of the table."""

    scenario: str  # the label: the case folder of a scenario.yaml, else the file stem
    name: str  # the scenario's own free-text name
    file: str
    provider: str
    calls: int
    context_messages: int
    prefix_stable: bool
    bytes_reused: float
    cached_share: float
    cost_ratio: float

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        for key in ("bytes_reused", "cached_share", "cost_ratio"):
            out[key] = round(out[key], 4)
        return out


@attrs.frozen
class Report:
    rows: tuple[Row, ...]
    failures: tuple[Failure, ...]
    tokenizer: str

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tokenizer": self.tokenizer,
            "results": [row.to_json() for row in self.rows],
            "failures": [failure.to_json() for failure in self.failures],
        }

    def table(self) -> str:
        header = (
            "scenario",
            "provider",
            "calls",
            "contexts",
            "prefix-stable",
            "bytes reused",
            "cached tokens",
            "cost vs uncached",
        )
        body = [
            (
                row.scenario,
                row.provider,
                str(row.calls),
                str(row.context_messages),
                "yes" if row.prefix_stable else "NO",
                f"{row.bytes_reused:.1%}",
                f"{row.cached_share:.1%}",
                f"{row.cost_ratio:.1%}",
            )
            for row in self.rows
        ]
        return "\n".join(align((header, *body)))


# --- scenarios -------------------------------------------------------------------------


def scenario_label(path: Path) -> str:
    """``golden/midnight/scenario.yaml`` -> ``midnight``; ``x/crash.yaml`` -> ``crash``."""
    return path.parent.name if path.name == "scenario.yaml" and path.parent.name else path.stem


def _other_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "2" if env.get("PYTHONHASHSEED") == "1" else "1"
    env["TZ"] = OTHER_TZ
    env["LC_ALL"] = OTHER_LOCALE
    env["LANG"] = OTHER_LOCALE
    return env


def _describe_environment() -> str:
    env = _other_environment()
    return " ".join(f"{key}={env[key]}" for key in ("PYTHONHASHSEED", "TZ", "LC_ALL"))


def _replay_elsewhere(path: Path, out: Path) -> tuple[int, str]:
    """``prefixlock replay`` of ``path`` in a subprocess under another seed, TZ and locale."""
    command = [
        *python_module_command(),
        "replay",
        str(path.resolve()),
        "--provider",
        "all",
        "--out",
        str(out),
    ]
    done = processes.run(command, env=_other_environment())
    return done.returncode, done.stderr.decode("utf-8", "replace").strip()


def _read_bodies(folder: Path) -> list[bytes]:
    files = sorted(folder.glob("[0-9][0-9][0-9][0-9].json"))
    return [f.read_bytes() for f in files]


def verify_scenario(
    scenario: Scenario,
    names: Sequence[str],
    *,
    elsewhere: Mapping[str, Sequence[bytes]] | None = None,
    tokenizer: str = "estimate",
) -> tuple[list[Row], list[Failure]]:
    """Rows and failures of one loaded scenario. ``elsewhere``: the bodies of the
    hash-seed replay (checked when given)."""
    sources = SourceIndex(scenario.bundle_root, extra=[scenario.path])
    calls = replay(scenario)
    label = scenario_label(scenario.path)
    failures = check_history(label, calls, sources)
    bodies = serialize_calls(calls, names)
    restarted = replay_bodies(scenario, names, restart_everywhere=True)
    epochs = [call.request.epoch for call in calls]
    retries = {
        call.index: next(c.index for c in calls if c.event == call.event and c.kind != "retry")
        for call in calls
        if call.kind == "retry"
    }
    contexts = {
        m.id
        for call in calls
        for m in call.request.messages
        if m.kind is MessageKind.REQUEST_CONTEXT
    }
    counter = get_tokenizer(tokenizer)
    rows = []
    for name in names:
        found = check_bodies(
            label, name, bodies[name], epochs=epochs, retries=retries, sources=sources
        )
        found += same_bytes(
            label,
            name,
            "restart",
            "replay with a restart before every step",
            bodies[name],
            restarted[name],
            sources,
        )
        if elsewhere is not None:
            found += same_bytes(
                label,
                name,
                "hash seed",
                f"replay in a subprocess under {_describe_environment()}",
                bodies[name],
                elsewhere.get(name, []),
                sources,
            )
        failures += found
        total = sum(len(b) for b in bodies[name])
        reused = sum(
            common_prefix(a, b) for a, b in zip(bodies[name], bodies[name][1:], strict=False)
        )
        model = _model(calls, name)
        simulated = simulate(name, bodies[name], model=model, tokenizer=counter)
        rows.append(
            Row(
                scenario=label,
                name=scenario.name,
                file=scenario.file,
                provider=name,
                calls=len(calls),
                context_messages=len(contexts),
                prefix_stable=not any(f.check == "prefix" for f in found),
                bytes_reused=reused / total if total else 0.0,
                cached_share=simulated.cached_share,
                cost_ratio=simulated.cost_ratio,
            )
        )
    return rows, failures


def _model(calls: Sequence[Call], provider: str) -> str | None:
    if not calls:
        return None
    try:
        return calls[0].request.settings_for(provider).model
    except KeyError:
        return None


def verify(
    paths: Sequence[Path],
    providers: Sequence[str] = ("all",),
    *,
    hash_seed: bool = True,
    tokenizer: str = "estimate",
) -> Report:
    """Verify scenario files (or folders of them; none: the golden suite).

    Raises :class:`PrefixlockError` (:class:`SpecErrors` for a bad scenario) for input
    errors; invariant failures are in the report.
    """
    names = provider_names(providers)
    get_tokenizer(tokenizer)  # refuse an unknown or missing tokenizer before any work
    files = scenario_files(paths) if paths else golden_scenarios()
    if not files:
        raise UsageError("no scenarios: golden/*/scenario.yaml is empty; pass PATH")
    scenarios = [load_scenario(path) for path in files]
    rows: list[Row] = []
    failures: list[Failure] = []
    with (
        tempfile.TemporaryDirectory(prefix="prefixlock-verify-") as tmp,
        ThreadPoolExecutor(max_workers=max(1, min(len(files), os.cpu_count() or 1))) as pool,
    ):
        jobs: list[Future[tuple[int, str]] | None] = [
            pool.submit(_replay_elsewhere, path, Path(tmp) / str(i)) if hash_seed else None
            for i, path in enumerate(files)
        ]
        for i, (scenario, job) in enumerate(zip(scenarios, jobs, strict=True)):
            elsewhere: dict[str, list[bytes]] | None = None
            if job is not None:
                code, stderr = job.result()
                if code != 0:
                    failures.append(
                        Failure(
                            scenario.file,
                            "hash seed",
                            f"the subprocess replay failed ({code}): {stderr}",
                        )
                    )
                else:
                    elsewhere = {n: _read_bodies(Path(tmp) / str(i) / n) for n in names}
            found_rows, found = verify_scenario(
                scenario, names, elsewhere=elsewhere, tokenizer=tokenizer
            )
            rows += found_rows
            failures += found
    return Report(tuple(rows), tuple(failures), get_tokenizer(tokenizer).name)
