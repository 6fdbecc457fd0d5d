"""Validation: what makes a Module safe to hand to JAX, shared by every loader
and by `jp.check`.

* `loading.decode`: decode (the codec) plus JAX's type rules, the one path
  every loader takes;
* `structure`: references, SSA and nesting on the message alone, reporting
  every error;
* `typecheck`: JAX's abstract evaluation of each decoded eqn, used by both;
* `checker`: `check`, which runs the stages and returns a `CheckReport`.
"""
