//! The Python package and the Spark job, as a user gets them: the wheel built by maturin,
//! `pip install`ed into a fresh venv, its pytest suite (python/tests: every table equals
//! `sqos export --format parquet`, pandas, DuckDB, errors, plot); then the Spark job in local mode
//! (examples/spark/test_job.py). Needs Python 3.9+ with venv, PyPI and a JRE: switched on by
//! SQOS_EXTERNAL_TESTS=1 (or CI=true), when a missing piece is a failure. The build and test
//! tools (maturin, pytest, pyspark: python/requirements-tools.txt, pinned) are those of the
//! Python `SQOS_PYTHON` names, or else of a venv this test makes once in target/py-tools.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support;

/// The pinned tools, also the constraints of the fresh venv.
fn requirements() -> PathBuf {
    support::repo().join("python/requirements-tools.txt")
}

/// pip's options for the fresh venv: binary wheels only, as python/tools-venv.sh.
const BINARY_ONLY: [&str; 2] = ["--only-binary", ":all:"];

/// The Python that has the build and test tools: `SQOS_PYTHON`, else target/py-tools (made by
/// python/tools-venv.sh from python/requirements-tools.txt the first time).
fn tools_python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(py) = std::env::var_os("SQOS_PYTHON") {
            return PathBuf::from(py);
        }
        let venv = support::repo().join("target/py-tools");
        let py = venv.join("bin/python");
        if !imports(&py, "maturin, pytest, pyspark, pyarrow") {
            // The one recipe, shared with .ci/run (which makes the venv while the code builds).
            run(
                Command::new("sh")
                    .arg(support::repo().join("python/tools-venv.sh"))
                    .arg(&venv),
                "python/tools-venv.sh target/py-tools",
            );
        }
        py
    })
}

fn imports(py: &Path, modules: &str) -> bool {
    Command::new(py)
        .args(["-c", &format!("import {modules}")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails the (switched-on) test when a tool is missing.
fn need(modules: &str, java: bool) {
    let py = tools_python();
    assert!(
        imports(py, modules),
        "{} cannot import {modules}: unset SQOS_PYTHON to have target/py-tools made",
        py.display()
    );
    if java {
        let ok = Command::new("java")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "no java: .ci/run installs a JRE for the Spark test");
    }
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The wheel, built once per test run by maturin in the workspace's target/, in the dev profile,
/// which is the test profile's build (Cargo.toml): every crate `cargo test` compiled is reused and
/// only pyo3 and the module are compiled (a release build would add most of an hour to CI on 2
/// cores). Not `--profile test` itself: cargo builds a cdylib in the test profile as a test
/// executable, which Python cannot load. Users build the release wheel (README).
fn wheel() -> &'static Path {
    static WHEEL: OnceLock<PathBuf> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let repo = support::repo();
        let out = repo.join("target/wheels-test");
        let _ = std::fs::remove_dir_all(&out);
        run(
            Command::new(tools_python())
                .args(["-m", "maturin", "build", "--quiet", "-m"])
                .arg(repo.join("python/Cargo.toml"))
                .arg("-o")
                .arg(&out),
            "maturin build",
        );
        let wheels: Vec<PathBuf> = std::fs::read_dir(&out)
            .expect("wheel dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "whl"))
            .collect();
        assert_eq!(wheels.len(), 1, "{wheels:?}");
        let name = wheels[0]
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        assert!(name.contains("abi3"), "an abi3 wheel: {name}");
        wheels[0].clone()
    })
}

fn pip_install(python: &Path, options: &[&str], what: &[&str]) {
    run(
        Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(options)
            .args(what),
        &format!("{} -m pip install {}", python.display(), what.join(" ")),
    );
}

/// Runs a pytest suite; its temporary files (and anything Spark leaves in the working directory)
/// go to a scratch directory removed afterwards.
fn pytest(python: &Path, tests: &Path) {
    let repo = support::repo();
    let scratch = support::scratch("sqos-pytest-");
    run(
        Command::new(python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(format!(
                "--basetemp={}",
                scratch.path().join("tmp").display()
            ))
            .arg(tests)
            .current_dir(scratch.path())
            .env("SQOS_REPO", &repo)
            .env("SQOS_BIN", env!("CARGO_BIN_EXE_sqos")),
        &format!("pytest {}", tests.display()),
    );
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs Python 3.9+ with venv and PyPI (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn the_wheel_installs_in_a_fresh_venv_and_its_tests_pass() {
    let _heavy = support::exclusive();
    need("maturin, pytest", false);
    let wheel = wheel();
    let scratch = support::scratch("sqos-venv-");
    let venv = scratch.path().join("venv");
    run(
        Command::new(tools_python()).args(["-m", "venv"]).arg(&venv),
        "python -m venv",
    );
    let py = venv.join("bin/python");
    // The wheel with its test extras (pytest, pandas, duckdb) from the package index, as a
    // user installs it (at the pinned versions).
    let constraints = requirements().display().to_string();
    pip_install(
        &py,
        &BINARY_ONLY,
        &["-c", &constraints, &format!("{}[test]", wheel.display())],
    );
    pytest(&py, &support::repo().join("python/tests"));
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs Python 3.9+ with venv, PyPI and a JRE (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn the_spark_job_writes_what_sqos_export_writes() {
    let _heavy = support::exclusive();
    need("maturin, pytest, pyspark, pyarrow", true);
    let wheel = wheel();
    let py = tools_python();
    pip_install(
        py,
        &["--force-reinstall", "--no-deps"],
        &[&wheel.display().to_string()],
    );
    pytest(py, &support::repo().join("examples/spark/test_job.py"));
}
