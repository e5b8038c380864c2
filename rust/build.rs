//! Finds or builds libmnemo for the Rust crate.
//!
//! * `MNEMO_LIB_DIR` set: link the prebuilt library found there (a CMake build
//!   folder or an install prefix); `MNEMO_INCLUDE_DIR` optionally names the
//!   folder holding `mnemo.h` (default: the bundled `cabi/include`).
//! * Otherwise: configure and build the bundled C++/CUDA sources with CMake
//!   into `OUT_DIR`, in a build folder of its own per source tree (a packaged
//!   copy of the crate never reuses the checkout's CMake cache). The CPU
//!   library alone by default; the `cuda` feature builds the CUDA module too
//!   (MNEMO_CUDA=ON), for the architectures in `MNEMO_CUDA_ARCHS` (a CMake
//!   list such as `90-real`, or `native`) or else the full list. `MNEMO_CUDA`
//!   (AUTO, ON, OFF), when set, overrides the feature.
//!
//! Either way the library folder is put in the rpath of this crate's tests,
//! examples and binaries, so they find libmnemo.so and the CUDA module next to
//! it without LD_LIBRARY_PATH.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Lines of CMake output shown when a step fails; the rest is noise.
const LOG_TAIL_LINES: usize = 40;

fn main() {
    for var in [
        "MNEMO_LIB_DIR",
        "MNEMO_INCLUDE_DIR",
        "MNEMO_CUDA",
        "MNEMO_CUDA_ARCHS",
        "CXX",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bundled_include = root.join("cabi").join("include");

    let (lib_dir, include_dir, prefix, bundled) = match env::var_os("MNEMO_LIB_DIR") {
        Some(dir) if !dir.is_empty() => {
            let (l, i, p) = prebuilt(PathBuf::from(dir), &bundled_include);
            (l, i, p, false)
        }
        _ => {
            let (lib_dir, build_dir) = build_bundled(&root);
            (lib_dir, bundled_include, build_dir, true)
        }
    };

    println!(
        "cargo:rerun-if-changed={}",
        include_dir.join("mnemo.h").display()
    );
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    if bundled {
        // The bundled build links libmnemo.a, so every program that depends
        // on this crate runs without a search path for libmnemo.so; its
        // own needs come from the system.
        println!("cargo:rustc-link-lib=static=mnemo");
        for lib in [
            "stdc++", "gomp", "xxhash", "hwy", "openblas", "roaring", "dl", "pthread", "m",
        ] {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    } else {
        println!("cargo:rustc-link-lib=dylib=mnemo");
    }
    // Seen by dependents as DEP_MNEMO_INCLUDE / DEP_MNEMO_ROOT / DEP_MNEMO_LIB.
    println!("cargo:include={}", include_dir.display());
    println!("cargo:root={}", prefix.display());
    println!("cargo:lib={}", lib_dir.display());
    if env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("unix") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    }
}

/// Uses an already-built library; returns (lib dir, include dir, root).
fn prebuilt(dir: PathBuf, bundled_include: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let dir = dir.canonicalize().unwrap_or_else(|e| {
        panic!(
            "mnemo: MNEMO_LIB_DIR={} is not a readable folder: {e}",
            dir.display()
        )
    });
    let lib_dir = find_in_prefix(&dir).unwrap_or_else(|| {
        panic!(
            "mnemo: no {} under MNEMO_LIB_DIR={} (looked in it, lib/ and lib64/); \
             build the `mnemo` CMake target first or unset MNEMO_LIB_DIR to build the bundled sources",
            lib_file_name(),
            dir.display()
        )
    });
    println!(
        "cargo:rerun-if-changed={}",
        lib_dir.join(lib_file_name()).display()
    );
    let include_dir = match env::var_os("MNEMO_INCLUDE_DIR") {
        Some(inc) if !inc.is_empty() => PathBuf::from(inc),
        _ => bundled_include.to_path_buf(),
    };
    if !include_dir.join("mnemo.h").is_file() {
        panic!(
            "mnemo: MNEMO_INCLUDE_DIR={} holds no mnemo.h",
            include_dir.display()
        );
    }
    (lib_dir, include_dir, dir)
}

/// Configures and builds the bundled sources with CMake; returns the lib
/// dir and the build dir.
fn build_bundled(root: &Path) -> (PathBuf, PathBuf) {
    for item in ["CMakeLists.txt", "cmake", "core", "cabi", "kernels"] {
        let path = root.join(item);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    if !root.join("CMakeLists.txt").is_file() {
        panic!(
            "mnemo: {} is missing, so the bundled library cannot be built; set MNEMO_LIB_DIR to a prebuilt mnemo",
            root.join("CMakeLists.txt").display()
        );
    }
    require_tool("cmake", &[OsString::from("cmake")], "cmake");
    require_tool("a C++ compiler", &cxx_candidates(), "g++");

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let build = out.join(format!("cmake-build-{:016x}", source_key(root)));
    let feature = env::var_os("CARGO_FEATURE_CUDA").is_some();
    let cuda = env::var("MNEMO_CUDA")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| if feature { "ON" } else { "OFF" }.to_string());

    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(root)
        .arg("-B")
        .arg(&build)
        .arg("-DCMAKE_BUILD_TYPE=Release")
        .arg(format!("-DMNEMO_CUDA={cuda}"))
        .arg("-DMNEMO_BUILD_TESTS=OFF")
        .arg("-DMNEMO_BUILD_BENCH=OFF")
        .arg("-DMNEMO_BUILD_FUZZ=OFF");
    if let Some(archs) = env::var_os("MNEMO_CUDA_ARCHS").filter(|a| !a.is_empty()) {
        let mut arg = OsString::from("-DCMAKE_CUDA_ARCHITECTURES=");
        arg.push(archs);
        configure.arg(arg);
    }
    run_logged(configure, "configure", &build);

    // Only the library and, when configured, the CUDA module: the demo and
    // the other targets are not needed here. Cargo's job count (NUM_JOBS)
    // also bounds the C++ build.
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "1".to_string());
    let mut compile = Command::new("cmake");
    compile
        .arg("--build")
        .arg(&build)
        .arg("--config")
        .arg("Release")
        .arg("--parallel")
        .arg(jobs)
        .arg("--target")
        .arg("mnemo")
        .arg("mnemo_static");
    // CMake keeps a CMakeFiles/<target>.dir folder for each target it
    // generated; the module target exists only when CUDA was found.
    if build
        .join("kernels")
        .join("CMakeFiles")
        .join("mnemo_cuda.dir")
        .is_dir()
    {
        compile.arg("mnemo_cuda");
    }
    run_logged(compile, "build", &build);

    let lib_dir = find_library(&build).unwrap_or_else(|| {
        panic!(
            "mnemo: CMake finished but produced no {} under {}",
            lib_file_name(),
            build.display()
        )
    });
    (lib_dir, build)
}

/// A key for the source tree: CMake refuses a build folder configured for
/// another source folder, and `cargo package` builds a copy of the sources
/// with the same OUT_DIR as the checkout.
fn source_key(root: &Path) -> u64 {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    root.canonicalize()
        .unwrap_or_else(|_| root.to_path_buf())
        .hash(&mut hasher);
    hasher.finish()
}

fn lib_file_name() -> &'static str {
    match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") => "libmnemo.dylib",
        _ => "libmnemo.so",
    }
}

/// The folder holding the library: `dir` itself, its lib/ or lib64/.
fn find_in_prefix(dir: &Path) -> Option<PathBuf> {
    ["", "lib", "lib64"]
        .iter()
        .map(|sub| {
            if sub.is_empty() {
                dir.to_path_buf()
            } else {
                dir.join(sub)
            }
        })
        .find(|candidate| candidate.join(lib_file_name()).exists())
}

/// The folder holding the library in a fresh build tree: the usual places
/// first, then the shallowest match.
fn find_library(dir: &Path) -> Option<PathBuf> {
    find_in_prefix(dir).or_else(|| search_tree(dir, lib_file_name(), 4))
}

fn search_tree(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let mut subdirs = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if entry.file_name() == name {
            return Some(dir.to_path_buf());
        }
        // Skip CMake's own scratch folders; they never hold the product.
        let is_scratch = entry.file_name() == "CMakeFiles";
        if path.is_dir() && !is_scratch {
            subdirs.push(path);
        }
    }
    if depth == 0 {
        return None;
    }
    subdirs.sort();
    subdirs
        .iter()
        .find_map(|sub| search_tree(sub, name, depth - 1))
}

fn cxx_candidates() -> Vec<OsString> {
    match env::var_os("CXX") {
        Some(cxx) if !cxx.is_empty() => vec![cxx],
        _ => ["c++", "g++", "clang++"]
            .iter()
            .map(OsString::from)
            .collect(),
    }
}

/// Panics with a one-line hint when none of `candidates` runs.
fn require_tool(what: &str, candidates: &[OsString], debian_package: &str) {
    let found = candidates.iter().any(|tool| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    });
    if !found {
        let tried: Vec<_> = candidates.iter().map(|c| c.to_string_lossy()).collect();
        panic!(
            "mnemo: {what} is needed to build the bundled library but was not found (tried: {}); \
             install it (Debian: `apt-get install {debian_package}`) or set MNEMO_LIB_DIR to a prebuilt mnemo",
            tried.join(", ")
        );
    }
}

/// Runs a CMake step; on failure panics with the tail of its output.
fn run_logged(mut cmd: Command, step: &str, build: &Path) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("mnemo: could not run cmake ({step}): {e}"));
    if output.status.success() {
        return;
    }
    // CMake prints its errors on stderr; progress alone goes to stdout.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = if stderr.trim().is_empty() {
        String::from_utf8_lossy(&output.stdout)
    } else {
        stderr
    };
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
    panic!(
        "mnemo: CMake {step} failed ({}); last lines:\n{tail}\n\
         hint: full logs are in {}; set MNEMO_CUDA=OFF to skip the CUDA module, \
         or MNEMO_LIB_DIR to a prebuilt mnemo",
        output.status,
        build.join("CMakeFiles").display()
    );
}
