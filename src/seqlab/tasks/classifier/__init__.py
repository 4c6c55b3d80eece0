"""What every task that puts a label on its input shares: the labels of a run (``Classes``), the
predictor that every classifier extends (``Classifier``: classify, evaluate, the confusion matrix),
temperature scaling (``calibration``), accuracy and macro-F1 (``metrics``), the held-out split
(``splits``), and the cross-entropy loss and validation (``training``).

Not a task itself: text and image classification (:mod:`seqlab.tasks.classification`) and audio
classification (:mod:`seqlab.tasks.audio`) build on it, so that a run of one of them imports its
own task and this, never the other task.
"""
