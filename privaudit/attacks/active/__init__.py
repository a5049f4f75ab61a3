"""Active attacks: a participant who lies (issue 39). It follows the protocol except in what it
sends, through a `privaudit.wire.Malicious` tap whose strategy crafts its messages from what that
tap heard so far, and only on defenses whose step mixes what the wire delivers.

    threat    the strategy on the wire (`TrapOverride`), the malicious tap it speaks through, and
              the assumptions an attack states and checks (one-line refusals)
    override  the state override: the victim's averaging rule solved for the liar's message
    trap      trap weights: a first fully connected layer whose units each fire for few records
    recovery  the records read off the victim's release at the trapped point
    trial     one run with the lie beside the same run without it, both inverted and scored, and
              the attacks an `[[attack]]` table's kind names (`ACTIVE_ATTACKS`: "trap_weights")
"""
