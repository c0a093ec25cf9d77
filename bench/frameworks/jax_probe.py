"""How far JAX gets on the GPU it is given (JAX_PLATFORMS=cuda, so that it
fails instead of falling back to the CPU); one line per step, as
torch_probe.py.
  JAX_PLATFORMS=cuda python3 jax_probe.py
"""
import sys
import traceback


def step(name, fn):
    try:
        print(f"step {name}: ok {fn()}", flush=True)
    except Exception as e:  # a framework error, reported and passed over
        print(f"step {name}: FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              flush=True)
        traceback.print_exc(file=sys.stderr)


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

print(f"jax {jax.__version__}", flush=True)
step("devices", lambda: jax.devices())
step("elementwise", lambda: float((jnp.arange(1 << 20, dtype=jnp.float32) * 2 + 1).sum()))
step("jit_matmul", lambda: float(jax.jit(lambda a: (a @ a).sum())(jnp.ones((256, 256)))))


def train_step():
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    w = jax.random.normal(k1, (64, 10)) * 0.1
    x = jax.random.normal(k2, (256, 64))
    y = jax.random.randint(k3, (256,), 0, 10)

    def loss(w):
        logits = x @ w
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(256), y])

    @jax.jit
    def step_fn(w):
        l, g = jax.value_and_grad(loss)(w)
        return w - 0.1 * g, l

    for _ in range(50):
        w, l = step_fn(w)
    return f"{float(l):.8f}"


step("jit_train", train_step)
