"""``inspect``, ``integrity``, ``export`` and ``import``: checkpoint stores."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import CheckpointError, InputError, UsageError
from ..review.cacheuse import DEFAULT_SLACK, CacheUse, cache_use, summary_rows, sweep
from ..review.inspection import inspect_json, inspect_text
from ..review.tables import align
from ..runtime.wirecheck import wire_problems
from ..store.contract import DurableStore, Head, head_problems
from ..store.jsonl import export_jsonl, import_jsonl, read_jsonl
from ..store.urls import is_postgres_url, open_store, redact_url, sqlite_path
from .console import FINDING, OK, Command, err, out, out_json, safe

__all__ = ["COMMANDS"]


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "store",
        help="the checkpoint store: a SQLite file path, sqlite:///path/to.db or postgresql://...",
    )


def _open_store(target: str, *, create: bool = False) -> DurableStore:
    """Open the store ``target`` names; an SQLite file must exist unless ``create``, and
    without ``create`` it is opened read-only (a read-only copy can be inspected)."""
    if not create and not is_postgres_url(target) and not sqlite_path(target).is_file():
        raise InputError(f"{redact_url(target)}: no such store")
    return open_store(target, read_only=not create)


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument("conversation", nargs="?", help="conversation id (default: list them)")
    parser.add_argument("--json", action="store_true", help="print canonical JSON")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="per recorded model call: prompt tokens, cached tokens the prefix predicts (each "
        "call at its request's timestamp, so entries expire over idle gaps), tokens the "
        "provider read from and wrote to its cache; exit 1 if a call read fewer than "
        "predicted. Without a conversation: one line per conversation of the store",
    )
    parser.add_argument(
        "--slack",
        type=float,
        default=DEFAULT_SLACK,
        metavar="SHARE",
        help="with --cache: how far below the prediction a cache read may fall before it "
        "is flagged (default: %(default)s)",
    )


def _run_cache(store: DurableStore, args: argparse.Namespace) -> int:
    report = cache_use(store, args.conversation, slack=args.slack)
    if args.json:
        out_json("inspect-cache", report.to_json(), pretty=True)
    elif not report.calls:
        out(
            f"{args.conversation}: no model call was recorded with its usage, so there is "
            "nothing to compare: Conversation.record(output) stores what the provider "
            "reported (docs/agent-loop.md); Conversation.assistant does not"
        )
    else:
        for line in align(report.rows()):
            out(line.rstrip())
        flagged = len(report.flagged)
        out(f"{len(report.calls)} recorded call(s), {flagged} with fewer cached than predicted")
        if report.earlier:
            numbers = ", ".join(str(n) for n in report.earlier)
            out(
                f"call(s) {numbers}: the timestamp is before the previous call's (do two hosts' "
                "clocks disagree?); priced as sent with the previous call"
            )
        if not report.timed:
            out(
                "no request of these calls carried a timestamp: cache entries are predicted "
                "never to expire"
            )
    return FINDING if report.flagged else OK


def _run_cache_sweep(store: DurableStore, args: argparse.Namespace) -> int:
    """``inspect STORE --cache``: every conversation of the store, one line each."""
    everything = sweep(store, slack=args.slack)
    reports = [r for r in everything if isinstance(r, CacheUse)]
    unreadable = len(everything) - len(reports)
    flagged = [r for r in reports if r.flagged]
    if args.json:
        value = {"slack": args.slack, "conversations": [r.summary() for r in everything]}
        out_json("inspect-cache-list", value, pretty=True)
    else:
        for line in align(summary_rows(everything)):
            out(line.rstrip())
        calls = sum(len(r.calls) for r in reports)
        fewer = sum(len(r.flagged) for r in reports)
        footer = (
            f"{len(everything)} conversation(s), {calls} recorded call(s), {fewer} with fewer "
            f"cached than predicted in {len(flagged)} conversation(s)"
        )
        if unreadable:
            footer += f"; {unreadable} conversation(s) could not be read"
        out(footer)
    return FINDING if flagged or unreadable else OK


def _run_inspect(args: argparse.Namespace) -> int:
    with _open_store(args.store) as store:
        if args.conversation is None and args.cache:
            return _run_cache_sweep(store, args)
        if args.conversation is None:
            if args.json:
                out_json("inspect-list", {"conversations": list(store.conversations())})
                return OK
            for conversation in store.conversations():
                out(conversation)
            return OK
        if args.cache:
            return _run_cache(store, args)
        if args.json:
            out_json("inspect", inspect_json(store, args.conversation), pretty=True)
        else:
            sys.stdout.write(safe(inspect_text(store, args.conversation)))
    return OK


def _head(text: str) -> Head:
    try:
        return Head.parse(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _integrity_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument(
        "--expect-head",
        type=_head,
        metavar="SEQ:DIGEST",
        help="the head this conversation was last given (Conversation.head): exit 1 if the "
        "store is behind it, e.g. after a lost or damaged -wal file",
    )
    parser.add_argument(
        "--conversation",
        metavar="ID",
        help="the conversation --expect-head is about (default: the store's only one)",
    )


def _run_integrity(args: argparse.Namespace) -> int:
    with _open_store(args.store) as store:
        problems = store.integrity_check()
        names = store.conversations()
        count = len(names)
        for name in names:  # the stored wire templates give the providers' bytes
            try:
                stored = store.load(name)
            except CheckpointError:
                continue  # the store's own check above reports it
            if stored is not None:
                problems += wire_problems(stored)
        if args.expect_head is not None:
            conversation = args.conversation
            if conversation is None and count > 1:
                raise UsageError(
                    f"--expect-head: the store holds {count} conversations; "
                    "name one with --conversation"
                )
            if conversation is None and count == 0:
                problems.append(
                    f"the store holds no conversation, but a head {args.expect_head} was "
                    "expected: it lost committed records (a deleted or damaged -wal file?)"
                )
            else:
                conversation = conversation if conversation is not None else names[0]
                problems += head_problems(store, conversation, args.expect_head)
    for problem in problems:
        err(problem)
    if problems:
        err(f"prefixlock integrity: {len(problems)} problem(s) in {redact_url(args.store)}")
        return FINDING
    out(f"{redact_url(args.store)}: ok ({count} conversation{'s' if count != 1 else ''})")
    return OK


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument("conversation", help="conversation id")
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write")


def _run_export(args: argparse.Namespace) -> int:
    with _open_store(args.store) as store:
        export_jsonl(store, args.conversation, args.out)
    out(f"wrote {args.out}")
    return OK


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument("jsonl", type=Path, help="a file written by `prefixlock export`")


def _run_import(args: argparse.Namespace) -> int:
    read_jsonl(args.jsonl)  # verify everything first: a bad file creates no store
    with _open_store(args.store, create=True) as store:
        conversation = import_jsonl(args.jsonl, store)
    out(f"imported {conversation} into {redact_url(args.store)}")
    return OK


def _store_command_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init",
        help="create the versioned prefixlock schema in a store (refuses another program's tables)",
    )
    init.add_argument(
        "url", help="the store: postgresql://..., sqlite:///path/to.db or a SQLite file path"
    )


def _run_store_command(args: argparse.Namespace) -> int:
    # one action so far: init
    with _open_store(args.url, create=True) as store:
        created, version = store.created_schema, store.schema_version
    name = redact_url(args.url)
    if created:
        out(f"{name}: created the prefixlock store schema (version {version})")
    else:
        out(f"{name}: already a prefixlock store (schema version {version}); nothing changed")
    return OK


COMMANDS = (
    Command(
        "store",
        "manage a checkpoint store: `store init URL` creates its versioned schema",
        _store_command_arguments,
        _run_store_command,
    ),
    Command(
        "inspect",
        "print a stored conversation: root, records, epochs, current request",
        _inspect_arguments,
        _run_inspect,
    ),
    Command(
        "integrity",
        "check a checkpoint store (database checks, hash chains, heads)",
        _integrity_arguments,
        _run_integrity,
    ),
    Command("export", "export a stored conversation as JSONL", _export_arguments, _run_export),
    Command("import", "import a JSONL conversation into a store", _import_arguments, _run_import),
)
