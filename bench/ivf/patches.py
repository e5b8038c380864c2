"""Real data for the index benchmark without a download: 8 x 8 RGB patches of
the two photographs scikit-learn ships (load_sample_images), as 192-dim
vectors with their mean removed and unit length (a classic image-descriptor
workload). Base rows come from every second pixel of both images except the
right-most 64 columns of the second; queries from those columns, so no
query is stored."""
import numpy as np


def patches(stride: int = 2, size: int = 8, n_queries: int = 1000, seed: int = 5):
    from sklearn.datasets import load_sample_images
    imgs = [np.asarray(im, dtype=np.float32) / 255.0 for im in load_sample_images().images]

    def cut(im, x0, x1):
        h = im.shape[0]
        out = [im[y:y + size, x:x + size].reshape(-1) for y in range(0, h - size + 1, stride)
               for x in range(x0, x1 - size + 1, stride)]
        return np.stack(out)

    w1 = imgs[1].shape[1]
    base = np.concatenate([cut(imgs[0], 0, imgs[0].shape[1]), cut(imgs[1], 0, w1 - 64)])
    qs = cut(imgs[1], w1 - 64, w1)
    rng = np.random.default_rng(seed)
    qs = qs[rng.choice(len(qs), size=min(n_queries, len(qs)), replace=False)]

    def unit(x):
        x = x - x.mean(axis=1, keepdims=True)
        n = np.linalg.norm(x, axis=1, keepdims=True)
        keep = n[:, 0] > 1e-3  # flat patches have no direction
        return np.ascontiguousarray((x[keep] / n[keep]).astype(np.float32))

    return unit(base), unit(qs)
