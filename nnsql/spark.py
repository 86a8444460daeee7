"""Score with a model exported by `nnsql export spark` from PySpark: columns that call its SQL functions.

from nnsql import spark as nn
events.withColumn("p", nn.predict_proba("higgs", "gru_input", "hlf_input"))
"""

from nnsql.export.spark.api import label, predict, predict_proba, score

__all__ = ["label", "predict", "predict_proba", "score"]
