"""The host runtime: how Ember runs the ONNX operators it keeps as host ops.

This package is a library beside the pipeline rather than a stage of it.  It needs only ember.ir's
errors and attribute values, and two stages use it: ember-import checks that every host op of a model
it imports can run (ember.host.check), and the simulator runs them (ember.sim.host, which adds the
cost model).  Keeping both on one runtime means a model that imports does not fail at simulation.
"""

from .executors import ENV, HELP, RUNTIMES, runtime, set_runtime
from .graph import HostNode, build_model
from .run import check_node, run_nodes

__all__ = ["ENV", "HELP", "RUNTIMES", "HostNode", "build_model", "check_node", "run_nodes", "runtime", "set_runtime"]
