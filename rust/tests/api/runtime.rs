//! Runtime creation, reports and library information.

use mnemo::{Backend, Precision, Runtime, Status};

#[test]
fn cpu_runtime_reports_what_was_asked() {
    let rt = Runtime::builder()
        .cpu()
        .threads(2)
        .precision(Precision::Fast)
        .build()
        .unwrap();
    let info = rt.info().unwrap();
    assert_eq!(info.backend_requested, Backend::Cpu);
    assert_eq!(info.backend_active, Backend::Cpu);
    assert_eq!(info.precision, Precision::Fast);
    assert_eq!(info.device_id, None);
    assert_eq!(info.num_threads, 2);
    assert!(!info.reason.is_empty(), "the report says why");
    assert!(!info.device_name.is_empty(), "the CPU SIMD level");
}

#[test]
fn auto_runtime_picks_a_backend_and_says_why() {
    let rt = Runtime::new().unwrap();
    let info = rt.info().unwrap();
    assert_eq!(info.backend_requested, Backend::Auto);
    assert!(matches!(info.backend_active, Backend::Cpu | Backend::Cuda));
    assert!(!info.reason.is_empty());
    if !info.cuda_available {
        assert_eq!(info.backend_active, Backend::Cpu);
    }
}

#[test]
fn cuda_is_an_error_without_a_gpu_never_a_fallback() {
    let cuda_seen = Runtime::new().unwrap().info().unwrap().cuda_available;
    match Runtime::builder().cuda().build() {
        Ok(rt) => {
            assert!(cuda_seen);
            let info = rt.info().unwrap();
            assert_eq!(info.backend_active, Backend::Cuda);
            assert!(info.device_id.is_some());
        }
        Err(e) => {
            assert!(!cuda_seen, "CUDA visible to AUTO but not creatable: {e}");
            assert_eq!(e.status, Status::BackendUnavailable);
            assert!(!e.message.is_empty(), "the message says why");
            eprintln!("skipped: no CUDA backend: {}", e.message);
        }
    }
}

#[test]
fn clones_share_one_runtime() {
    let a = Runtime::builder().cpu().threads(1).build().unwrap();
    let b = a.clone();
    drop(a);
    assert_eq!(b.info().unwrap().num_threads, 1);
}

#[test]
fn library_information() {
    assert_eq!(mnemo::version(), env!("CARGO_PKG_VERSION"));
    assert_eq!(mnemo::abi_version(), mnemo::sys::MNEMO_ABI_VERSION);
    let info = mnemo::build_info();
    assert!(info.contains(mnemo::version()), "{info}");
    assert!(!info.contains('\n'), "one line: {info}");
}
