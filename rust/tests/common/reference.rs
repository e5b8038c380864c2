//! An independent float64 reference for every operation, written from the
//! contract in mnemo.h and computed over the same stored (rounded) values.

use mnemo::{Metric, Storage};

pub fn to_f64<T: Storage>(values: &[T]) -> Vec<f64> {
    values.iter().map(|&v| v.to_f32_exact() as f64).collect()
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// metric(a, b); cosine with a zero-norm vector is 0.
pub fn score(metric: Metric, a: &[f64], b: &[f64]) -> f64 {
    match metric {
        Metric::Dot => dot(a, b),
        Metric::Cosine => {
            let (na, nb) = (norm(a), norm(b));
            if na == 0.0 || nb == 0.0 {
                0.0
            } else {
                dot(a, b) / (na * nb)
            }
        }
        Metric::L2Sq => a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum(),
    }
}

/// scores[i * n + j] = metric(queries[i], targets[j]).
pub fn similarity(metric: Metric, queries: &[f64], targets: &[f64], dim: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for q in queries.chunks(dim) {
        for t in targets.chunks(dim) {
            out.push(score(metric, q, t));
        }
    }
    out
}

/// Ranking key used by a search: score + bias (similarities) or
/// distance - bias (L2), so a positive bias always helps.
pub fn ranked(metric: Metric, score: f64, bias: f64) -> f64 {
    if metric.higher_is_better() {
        score + bias
    } else {
        score - bias
    }
}

/// Whether `a` ranks before `b`: better score first, then the smaller id.
pub fn before(metric: Metric, a: (u64, f64), b: (u64, f64)) -> bool {
    if a.1 != b.1 {
        if metric.higher_is_better() {
            a.1 > b.1
        } else {
            a.1 < b.1
        }
    } else {
        a.0 < b.0
    }
}

/// The exact top-k of (id, score) candidates under the tie rule.
pub fn top_k(metric: Metric, candidates: &[(u64, f64)], k: usize) -> Vec<(u64, f64)> {
    let mut sorted = candidates.to_vec();
    sorted.sort_by(|&a, &b| {
        if before(metric, a, b) {
            std::cmp::Ordering::Less
        } else if before(metric, b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    sorted.truncate(k);
    sorted
}

/// Linear interpolation of one trajectory row, as mnemo.h words it (the
/// rule of numpy.interp): n = 1 or t >= the last time gives the last sample,
/// t < the first time the first sample; otherwise i is the largest index
/// with t_i <= t (so t_i <= t < t_i+1, and a target on a repeated time takes
/// the last sample of that time) and out = a + w (b - a) with
/// w = (t - t_i) / (t_i+1 - t_i).
pub fn resample_row(samples: &[f64], times: &[f64], dim: usize, t: f64) -> Vec<f64> {
    let n = times.len();
    assert_eq!(samples.len(), n * dim);
    let sample = |i: usize| &samples[i * dim..(i + 1) * dim];
    if n == 1 || t >= times[n - 1] {
        return sample(n - 1).to_vec();
    }
    if t < times[0] {
        return sample(0).to_vec();
    }
    let i = times
        .iter()
        .rposition(|&ti| ti <= t)
        .expect("t >= times[0]");
    let w = ((t - times[i]) / (times[i + 1] - times[i])).clamp(0.0, 1.0);
    sample(i)
        .iter()
        .zip(sample(i + 1))
        .map(|(a, b)| a + w * (b - a))
        .collect()
}

/// Each row divided by its L2 norm; zero rows stay zero.
pub fn normalize_rows(data: &[f64], dim: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(data.len());
    for row in data.chunks(dim) {
        let n = norm(row);
        out.extend(row.iter().map(|&x| if n == 0.0 { 0.0 } else { x / n }));
    }
    out
}

/// LayerNorm with the biased variance; var + eps == 0 gives beta.
pub fn layer_norm(
    data: &[f64],
    dim: usize,
    gamma: Option<&[f64]>,
    beta: Option<&[f64]>,
    eps: f64,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(data.len());
    for row in data.chunks(dim) {
        let mean = row.iter().sum::<f64>() / dim as f64;
        let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / dim as f64;
        let denom = (var + eps).sqrt();
        for (j, &x) in row.iter().enumerate() {
            let g = gamma.map_or(1.0, |g| g[j]);
            let b = beta.map_or(0.0, |b| b[j]);
            let normed = if denom == 0.0 {
                0.0
            } else {
                (x - mean) / denom
            };
            out.push(normed * g + b);
        }
    }
    out
}
