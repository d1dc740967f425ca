from pipecheck.measure.compile_watch import describe_difference, explanation_findings

# Verbatim from JAX 0.10.2 with jax_explain_cache_misses=True (AOT lowered without sharding).
REAL_MESSAGE = (
    "TRACING CACHE MISS at /tmp/exp1.py:28:4 (<module>):\n"
    "  for train_step defined at /tmp/exp1.py:17\n"
    "  all previously seen cache keys differ. For the closest previous key:\n"
    "  different input types:\n"
    "  * at batch['x'], now f32[64,32]({Auto: ('data',)}) and before f32[64,32]({})"
)


def test_sharding_difference_becomes_a_finding_naming_the_argument():
    (f,) = explanation_findings([REAL_MESSAGE], "jit(train_step)", 2)
    assert f.kind == "recompile"
    assert f.location == "batch['x']"
    assert "changed sharding" in f.message
    assert "f32[64,32]({Auto: ('data',)})" in f.message
    assert "sharding=" in f.fix
    assert f.numbers["train_step_compiles"] == 2


def test_first_compilation_is_not_a_finding():
    first = ("TRACING CACHE MISS at x.py:1:1 (<module>):\n  never seen function:\n"
             "    train_step id=1")
    assert explanation_findings([first], "jit(train_step)", 1) == []


def test_unexplained_recompile_is_still_reported():
    (f,) = explanation_findings([], "jit(train_step)", 3)
    assert "compiled 3 times" in f.message


def test_kinds_of_difference():
    # the strings are as JAX 0.10.2 prints them
    assert describe_difference("f32[64,32]({Auto: ('data',)})", "f32[64,32]({})") == "sharding"
    assert describe_difference("f32[3]({})", "f32[]({})") == "shape"
    assert describe_difference("i32[3]", "f32[3]") == "dtype"
    assert describe_difference("f32[]{weak_type=False}", "f32[]{weak_type=True}") == "weak type"


def test_weak_type_message_drops_the_docs_url():
    msg = ("TRACING CACHE MISS at x.py:1:1 (<module>):\n  for train_step defined at x.py:1\n"
           "  * at a, now f32[]{weak_type=False} and before f32[]{weak_type=True}"
           "https://docs.jax.dev/en/latest/type_promotion.html#weak-types")
    (f,) = explanation_findings([msg], "jit(train_step)", 2)
    assert "changed weak type" in f.message and "https" not in f.message
    assert "explicit dtype" in f.fix


def _message(line: str) -> str:
    """A cache-miss explanation around one differing argument's line, as JAX prints it."""
    return ("TRACING CACHE MISS at /tmp/rc.py:22 (<module>):\n"
            "  for train_step defined at /tmp/rc.py:12\n"
            "  all previously seen cache keys differ. For the closest previous key:\n"
            f"  different input types:\n  {line}")


# Verbatim from JAX 0.10.2 (2 CPU devices): params placed on a mesh between two calls, and a
# typed key passed where a raw one was.
PARAMS_SHARDED = ("* at params['w'], now f32[4@data,4]({Explicit: ('data',)}) "
                  "and before f32[4,4]({})")
RNGS_TYPED = "* at rngs, now key<fry>[]({}) and before u32[2]({})"


def test_a_params_sharding_change_gets_the_params_advice():
    (f,) = explanation_findings([_message(PARAMS_SHARDED)], "jit(train_step)", 2)
    assert f.location == "params['w']" and "changed sharding" in f.message
    assert "keep the params' sharding fixed" in f.fix
    assert "jax.device_put(params, sharding)" in f.fix and "out_shardings" in f.fix
    assert "ShapeDtypeStruct" not in f.fix  # not the batch's AOT advice


def test_a_raw_key_then_a_typed_key_gets_the_keys_advice():
    (f,) = explanation_findings([_message(RNGS_TYPED)], "jit(train_step)", 2)
    assert f.location == "rngs" and "changed dtype" in f.message
    assert "typed key arrays (jax.random.key(seed))" in f.fix
    assert "input pipeline" not in f.fix


def test_kinds_of_difference_of_mesh_axes_and_typed_keys():
    assert describe_difference("f32[4@data,4]({Explicit: ('data',)})", "f32[4,4]({})") == \
        "sharding"
    assert describe_difference("f32[8@data,4]({})", "f32[4,4]({})") == "shape"
    assert describe_difference("key<fry>[]({})", "u32[2]({})") == "dtype"
    assert describe_difference("key<fry>[2]({})", "key<fry>[]({})") == "shape"
