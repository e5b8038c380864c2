//! rust/src/sys.rs must be exactly what rust/gen-sys.sh makes from the
//! current mnemo.h, so the raw FFI never drifts from the C ABI.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tool_runs(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn sys_rs_matches_the_header() {
    for tool in ["bindgen", "rustfmt"] {
        if !tool_runs(tool) {
            eprintln!("skipped: `{tool}` is not installed, sys.rs freshness not checked");
            return;
        }
    }
    let out: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sys_fresh.rs");
    let status = Command::new("sh")
        .arg(root().join("rust").join("gen-sys.sh"))
        .arg(&out)
        .status()
        .expect("run rust/gen-sys.sh");
    assert!(status.success(), "rust/gen-sys.sh failed: {status}");
    let fresh = std::fs::read_to_string(&out).expect("read regenerated sys.rs");
    let committed =
        std::fs::read_to_string(root().join("rust/src/sys.rs")).expect("read rust/src/sys.rs");
    if fresh != committed {
        let first = fresh
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| fresh.lines().count().min(committed.lines().count()));
        panic!(
            "rust/src/sys.rs is stale (first difference at line {}): run rust/gen-sys.sh and commit it\n\
             fresh:     {:?}\ncommitted: {:?}",
            first + 1,
            fresh.lines().nth(first),
            committed.lines().nth(first)
        );
    }
}

/// sys.rs hand-writes MNEMO_NO_ID (bindgen cannot evaluate UINT64_MAX), so
/// check the header still says so.
#[test]
fn no_id_matches_the_header() {
    let header = std::fs::read_to_string(root().join("cabi/include/mnemo.h")).expect("mnemo.h");
    assert!(
        header.contains("#define MNEMO_NO_ID UINT64_MAX"),
        "MNEMO_NO_ID changed in mnemo.h; update rust/gen-sys.sh"
    );
    assert_eq!(mnemo::sys::MNEMO_NO_ID, u64::MAX);
    assert_eq!(mnemo::NO_ID, u64::MAX);
}

/// The crate version follows the header's (the library reads its version
/// from mnemo.h too).
#[test]
fn versions_agree() {
    let header = format!(
        "{}.{}.{}",
        mnemo::sys::MNEMO_VERSION_MAJOR,
        mnemo::sys::MNEMO_VERSION_MINOR,
        mnemo::sys::MNEMO_VERSION_PATCH
    );
    assert_eq!(header, env!("CARGO_PKG_VERSION"));
    assert_eq!(mnemo::version(), header);
    assert_eq!(mnemo::abi_version(), mnemo::sys::MNEMO_ABI_VERSION);
}
