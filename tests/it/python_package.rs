//! The Python package and the Spark job, as a user gets them: the wheel built by maturin,
//! `pip install`ed into a fresh venv, its pytest suite (python/tests: every table equals
//! `sqos export --format parquet`, pandas, DuckDB, errors, plot); then the Spark job in local mode
//! (examples/spark/test_job.py). Needs Python with maturin, pytest and pyspark, and a JRE:
//! switched on by SQOS_EXTERNAL_TESTS=1 (or CI=true), when a missing piece is a failure;
//! `.ci/run` makes the venv and points SQOS_PYTHON at it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support;

/// The Python that has the build and test tools (`SQOS_PYTHON`, else `python3`).
fn tools_python() -> PathBuf {
    std::env::var_os("SQOS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| "python3".into())
}

/// Fails the (switched-on) test when a tool is missing.
fn need(modules: &str, java: bool) {
    let py = tools_python();
    let ok = Command::new(&py)
        .args(["-c", &format!("import {modules}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import {modules}: .ci/run makes a venv with them and sets SQOS_PYTHON",
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

/// The wheel, built once per test run by maturin in the workspace's target/, in the dev profile:
/// it checks the package, and a release build of the crate and its dependencies would add most
/// of an hour to CI on 2 cores. Not `--profile test`: cargo builds a cdylib in its test profile
/// as a test executable, which Python cannot load. Users build the release wheel (README).
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

fn pip_install(python: &Path, options: &[&str], what: &str) {
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
            .arg(what),
        &format!("{} -m pip install {what}", python.display()),
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
    ignore = "needs Python with maturin and pytest, and PyPI (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn the_wheel_installs_in_a_fresh_venv_and_its_tests_pass() {
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
    // user installs it.
    pip_install(&py, &[], &format!("{}[test]", wheel.display()));
    pytest(&py, &support::repo().join("python/tests"));
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs Python with maturin, pytest, pyspark, pyarrow and a JRE (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn the_spark_job_writes_what_sqos_export_writes() {
    need("maturin, pytest, pyspark, pyarrow", true);
    let wheel = wheel();
    let py = tools_python();
    pip_install(
        &py,
        &["--force-reinstall", "--no-deps"],
        &wheel.display().to_string(),
    );
    pytest(&py, &support::repo().join("examples/spark/test_job.py"));
}
