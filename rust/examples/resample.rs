//! Trajectory resampling: robot-arm trajectories recorded at irregular times,
//! brought onto a common 10 Hz clock by linear interpolation, with per-row
//! valid lengths for trajectories of different durations.
//!
//! Run: `cargo run --example resample`

use mnemo::{AlignedVec, ResampleLengths, ResampleShape, Runtime};

fn main() -> Result<(), mnemo::Error> {
    let rt = Runtime::new()?;
    let (batch, n_src, n_tgt, dim) = (3usize, 40usize, 30usize, 7usize);

    // Row b has 20 + 10 b samples at jittered times; joint j follows sin.
    let src_len: AlignedVec<u64> = (0..batch as u64).map(|b| 20 + 10 * b).collect();
    let mut times = AlignedVec::from_elem(0.0f64, batch * n_src);
    let mut data = AlignedVec::from_elem(0.0f32, batch * n_src * dim);
    for b in 0..batch {
        let mut t = 0.0;
        for s in 0..n_src {
            t += 0.1 + 0.02 * ((b * 7 + s * 3) % 5) as f64;
            times[b * n_src + s] = t;
            for j in 0..dim {
                data[(b * n_src + s) * dim + j] = ((j + 1) as f64 * 0.3 * t).sin() as f32;
            }
        }
    }
    // A 10 Hz clock; each row keeps only the ticks inside its duration.
    let ticks = AlignedVec::from_iter((0..batch * n_tgt).map(|i| 0.1 * (i % n_tgt) as f64));
    let tgt_len: AlignedVec<u64> = (0..batch)
        .map(|b| {
            let end = times[b * n_src + src_len[b] as usize - 1];
            (0..n_tgt).filter(|&i| 0.1 * i as f64 <= end).count() as u64
        })
        .collect();

    let shape = ResampleShape {
        batch,
        n_src,
        n_tgt,
        dim,
    };
    let lengths = ResampleLengths {
        src: Some(&src_len),
        tgt: Some(&tgt_len),
    };
    let out = rt.resample(shape, &data, &times, &ticks, &lengths)?;

    for b in 0..batch {
        let valid = tgt_len[b] as usize;
        let mut worst = 0.0f64;
        for i in 0..valid {
            let t = ticks[b * n_tgt + i];
            let got = out[(b * n_tgt + i) * dim] as f64;
            // Before the first sample the first sample is held.
            let t = t.max(times[b * n_src]);
            worst = worst.max((got - (0.3 * t).sin()).abs());
        }
        println!(
            "row {b}: {} samples -> {valid} ticks at 10 Hz, joint 0 off the true curve by at most {worst:.4}",
            src_len[b]
        );
    }
    Ok(())
}
