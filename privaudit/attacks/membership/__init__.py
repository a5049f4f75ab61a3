"""Membership inference: was a record in the victim's training data?

    scores   LOSS, offline LiRA and RMIA as pure functions of model outputs, and the metrics the
             field reports (AUC, TPR at low FPR, with bootstrap intervals)
    methods  the attacks a membership cell runs, behind one interface, in an open registry
"""
