"""Hostile command lines: fixture names, durations, counts, revisions, DSNs and paths."""

from __future__ import annotations

from hypothesis import strategies as st

from bench.chaos.fuzz.hostile_names import names

FIXTURE_NAMES = ["v0.1", "v0.2", "v0.3"]
fixture_names = st.one_of(
    st.sampled_from(FIXTURE_NAMES),
    st.sampled_from(
        [
            "../v0.3",
            "v0.3/",
            "V0.3",
            "v0.3\x00",
            "snapshots",
            "legacy_workers",
            "negative",
            "",
            ".",
            "..",
            "/etc/passwd",
            "v0.3 ",
            "*",
        ]
    ),
    names,
    st.text(max_size=12),
)


durations = st.one_of(
    st.sampled_from(
        [
            "5s",
            "500ms",
            "2m",
            "0",
            "-1",
            "1e9",
            "99999999999s",
            "NaN",
            "5 s",
            "",
            "１s",
            "0.0001ms",
            "3h",
            "2147483647ms",
            "2147483648ms",
        ]
    ),
    st.text(max_size=6),
)
counts = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(["-1", "1000001", "99999999999999999999", "x", "", "1.5"]),
)
revisions = st.one_of(
    st.sampled_from(
        ["001", "002", "003", "004", "head", "005", "000", "4", "０04", "../004", "HEAD", ""]
    ),
    st.text(max_size=5),
)
hostile_dsns = st.sampled_from(
    [
        "host=/nonexistent port=1",
        "postgresql://u:hunter2@127.0.0.1:1/x",
        "not a dsn ' unterminated",
        "dbname=x password='unterminated",
        "",
        "postgresql://%zz@/x",
        "host=127.0.0.1 port=99999",
        "service=nonexistent",
    ]
)


@st.composite
def command_lines(draw: st.DrawFn, dsn: str, files: dict[str, str]) -> list[str]:
    """A command line of the data commands (never `db`, `demo` or `verify`: they act on the
    shared embedded server)."""
    target = ["--dsn", draw(st.just(dsn) | hostile_dsns)] if draw(st.booleans()) else []
    command = draw(
        st.sampled_from(
            [
                "upgrade",
                "preflight",
                "status",
                "inspect",
                "fixtures",
                "snapshot",
                "lint",
                "rehearse",
                "garbage",
            ]
        )
    )
    argv: list[str]
    if command == "upgrade":
        argv = ["upgrade", *target]
        for opt, values in (
            ("--to", revisions),
            ("--lock-timeout", durations),
            ("--statement-timeout", durations),
            ("--retries", counts),
        ):
            if draw(st.booleans()):
                argv += [opt, draw(values)]
        argv += draw(
            st.lists(st.sampled_from(["--force", "--json", "--sql"]), max_size=2, unique=True)
        )
    elif command == "preflight":
        argv = ["preflight", *target]
        for opt, values in (
            ("--target", revisions),
            ("--lock-timeout", durations),
            ("--statement-timeout", durations),
            ("--samples", counts),
            ("--fail-on", st.sampled_from(["blocking", "warning", "info", ""])),
        ):
            if draw(st.booleans()):
                argv += [opt, draw(values)]
        argv += draw(st.lists(st.just("--json"), max_size=1))
    elif command == "status":
        argv = ["status", *target, *draw(st.lists(st.just("--json"), max_size=1))]
    elif command == "inspect":
        argv = ["inspect", draw(names), *target]
        if draw(st.booleans()):
            argv += ["--namespace", draw(names)]
        argv += draw(st.lists(st.just("--json"), max_size=1))
    elif command == "fixtures":
        argv = ["fixtures", draw(st.sampled_from(["list", "load", "unload"]))]
        if draw(st.booleans()):
            argv.append(draw(fixture_names))
        argv += target + draw(st.lists(st.just("--json"), max_size=1))
    elif command == "snapshot":
        argv = ["snapshot", "import", draw(st.sampled_from(sorted(files.values()))), *target]
    elif command == "lint":
        # Never "/": lint would walk the whole file system looking for .sql files.
        paths = [*sorted(files.values()), "/nonexistent"]
        argv = ["lint", *draw(st.lists(st.sampled_from(paths), max_size=2))]
    elif command == "rehearse":
        argv = ["rehearse", "--dsn", draw(hostile_dsns)]
    else:
        argv = draw(st.lists(st.text(max_size=10), max_size=4))
    return [a for a in argv if "\x00" not in a]


WRITERS = ("upgrade", "fixtures", "snapshot")
