//! The runtimes every differential test runs on: always the CPU backend, and
//! the CUDA backend when a usable GPU is present.

use mnemo::{Backend, Precision, Runtime, Status};

pub struct Under {
    pub name: &'static str,
    pub rt: Runtime,
}

/// Set MNEMO_TEST_CUDA=1 (the GPU machine does) to fail instead of
/// skipping when the CUDA backend cannot be created.
fn cuda_required() -> bool {
    std::env::var("MNEMO_TEST_CUDA").is_ok_and(|v| v == "1")
}

pub fn cpu() -> Runtime {
    Runtime::builder()
        .cpu()
        .threads(2)
        .build()
        .expect("CPU runtime")
}

/// The CUDA runtime, or None after printing why the CUDA cases are skipped.
pub fn cuda(precision: Precision) -> Option<Runtime> {
    match Runtime::builder()
        .backend(Backend::Cuda)
        .precision(precision)
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) if e.status == Status::BackendUnavailable && !cuda_required() => {
            eprintln!("skipped: no CUDA backend: {}", e.message);
            None
        }
        Err(e) => panic!("CUDA runtime: {e}"),
    }
}

/// CPU, CUDA when available, and AUTO (which picks per call), all in EXACT
/// precision.
pub fn exact() -> Vec<Under> {
    let mut out = vec![Under {
        name: "cpu",
        rt: cpu(),
    }];
    if let Some(rt) = cuda(Precision::Exact) {
        out.push(Under { name: "cuda", rt });
    }
    out.push(Under {
        name: "auto",
        rt: Runtime::builder()
            .backend(Backend::Auto)
            .threads(2)
            .build()
            .expect("AUTO runtime"),
    });
    out
}

/// FAST precision runtimes (search candidates may come from tensor cores;
/// returned scores are still EXACT).
pub fn fast() -> Vec<Under> {
    let mut out = vec![Under {
        name: "cpu-fast",
        rt: Runtime::builder()
            .cpu()
            .threads(2)
            .precision(Precision::Fast)
            .build()
            .expect("CPU FAST runtime"),
    }];
    if let Some(rt) = cuda(Precision::Fast) {
        out.push(Under {
            name: "cuda-fast",
            rt,
        });
    }
    out
}
