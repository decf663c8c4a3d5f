"""The `advisor` command: a thin click group over the library, with one error funnel.

Each subcommand lives in `advisor.commands.<name>` and only parses options, calls the library
and picks a renderer. `main` is the only place that turns exceptions into exit codes: an
`AdvisorError` prints one line (the traceback only with ``--traceback``), a bug prints the
traceback and exits 70 so it is never mistaken for a finding.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
import threading
import traceback

import click

from advisor import DISTRIBUTION
from advisor.errors import AdvisorError, ExitCode
from advisor.safe_text import no_ci_commands, plain

INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in advisor, not in the user's input


COMMANDS = ("analyze", "gate", "profile", "rules")
"""Each subcommand's module under `advisor.commands`, by its name."""


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that command runs (or ``--help``
    lists them): `advisor analyze` never pays for `profile`'s, `gate`'s or `rules`' imports,
    part of its start-up (issue #39: a small trace in well under a CPU second)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"advisor.commands.{cmd_name}")
            self.add_command(module.command, cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=DISTRIBUTION)
@click.option("--traceback", "show_traceback", is_flag=True, help="Show the traceback of errors.")
@click.pass_context
def cli(ctx: click.Context, show_traceback: bool) -> None:
    """Why is my H100 training step slow, what should I change, and how much faster will it get."""
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = show_traceback


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    show_tb = "--traceback" in args
    try:
        result = cli.main(args=args, prog_name="advisor", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("advisor: aborted", err=True)
        return 130
    except click.ClickException as e:
        _show_usage_error(e)
        return ExitCode.BAD_INPUT if e.exit_code == 2 else e.exit_code
    except AdvisorError as e:
        if show_tb:
            traceback.print_exc()
        click.echo(f"advisor: error: {plain(e)}", err=True)  # one line, whatever the trace held
        return int(e.exit_code)
    except KeyboardInterrupt:
        click.echo("advisor: interrupted", err=True)
        return 130
    except OSError as e:
        if e.errno not in _STREAM_ERRNOS:
            return _internal_error()
        # Reports to files fail as `OutputError`; this is a standard stream that cannot take
        # what we print (`> /dev/full`, a closed pipe or descriptor): one line, if stderr can.
        _drop_stdout()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            click.echo(f"advisor: error: cannot write the output ({plain(e.strerror or e)})",
                       err=True)
        return ExitCode.BAD_INPUT
    except Exception:  # a bug: say so, with the traceback, and never exit 0/1/2
        return _internal_error()
    return int(result or 0)


def _show_usage_error(e: click.ClickException) -> None:
    """click's message in one line, as every other error (click's own block is four: usage,
    "Try ... --help", a blank line, the error), with where help is; through the output policy:
    it quotes what the user typed, file names included, and a file name is as hostile as a
    kernel name (`advisor.safe_text`)."""
    ctx = getattr(e, "ctx", None)
    command = ctx.command_path if ctx is not None else "advisor"
    message = " ".join(e.format_message().split())
    if message.endswith(".") and not message.endswith(".."):
        message = message[:-1]
    text = f"advisor: error: {message} (see '{command} --help')"
    click.echo(no_ci_commands(plain(text, 10_000)), err=True)
# A standard stream that fails a write: full (ENOSPC, EDQUOT, EFBIG), gone (EPIPE), closed
# (EBADF), broken (EIO).
_STREAM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EPIPE, errno.EBADF,
                            errno.EIO})


def _internal_error() -> int:
    """A bug: the traceback and exit 70, never mistaken for a verdict."""
    traceback.print_exc()
    click.echo("advisor: internal error (a bug in advisor; please report it with the "
               "traceback above)", err=True)
    return INTERNAL_ERROR


def _drop_stdout() -> None:
    """Point stdout's descriptor at /dev/null, so that what is still buffered for it is not
    written again (and fails again, with Python's own message) when the process exits."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _may_skip_teardown() -> bool:
    """Whether the process can end without Python's teardown: only advisor's own code ran in
    it (no user script, no torch, no Dask cluster whose finalizers stop worker processes) and
    no other thread is left that a normal exit would wait for."""
    if any(m in sys.modules for m in ("torch", "distributed", "dask.distributed")):
        return False
    return all(t is threading.main_thread() or t.daemon for t in threading.enumerate())


def run() -> None:
    """The ``advisor`` console script: `main`, then, where nothing but advisor ran, the process
    ends without tearing down its objects. Freeing a trace's op graph object by object at exit
    took 0.17 s of `advisor analyze`'s 1.85 s on a 2.9 MB Kineto trace (HTA's
    df_index_resolver, 216k events) and added nothing: the reports are written and the
    streams flushed first. (Mercurial ends its commands the same way.) A library caller of
    `main` keeps Python's normal exit."""
    code = main()
    if _may_skip_teardown():
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:  # None: the descriptor was closed when Python started
                    stream.flush()
        except (OSError, ValueError):  # a closed pipe: the normal exit reports it
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
