"""The clustered data of the index benchmarks: a mixture of Gaussian
clusters with random per-cluster scales over a shared isotropic noise floor,
rows L2-normalised (cosine). Queries come from the same mixture and are not
stored. Generated in chunks with numpy, seeded, float32."""
import numpy as np


class Mixture:
    def __init__(self, clusters: int, dim: int, seed: int = 7, scale_lo: float = 0.3, scale_hi: float = 1.0,
                 noise: float = 0.3, centre_scale: float = 1.0):
        rng = np.random.default_rng(seed)
        self.dim = dim
        # centre_scale 1: clusters far apart for their spread (neighbours
        # come from one cluster); smaller values overlap them.
        self.centres = rng.standard_normal((clusters, dim), dtype=np.float32) * np.float32(centre_scale)
        # Per-cluster spread around the centre, on top of the shared floor.
        s = rng.uniform(scale_lo, scale_hi, clusters).astype(np.float32)
        self.sigma = np.sqrt(s * s + noise * noise).astype(np.float32)

    def draw(self, n: int, seed: int, chunk: int = 65536, out=None) -> np.ndarray:
        rng = np.random.default_rng(seed)
        x = np.empty((n, self.dim), dtype=np.float32) if out is None else out
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            c = rng.integers(0, len(self.sigma), b - a)
            x[a:b] = rng.standard_normal((b - a, self.dim), dtype=np.float32)
            x[a:b] *= self.sigma[c, None]
            x[a:b] += self.centres[c]
            x[a:b] /= np.linalg.norm(x[a:b], axis=1, keepdims=True)
        return x
