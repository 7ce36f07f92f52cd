"""The demo recording's flows that speak the dashboard's words (`judgelab demo record`, `dashboard.demo_record`).

A mechanism's flow records its page's demo run through the entry points the page calls, with the page's default
settings, and returns the page's `PageDemo`; it is named by the mechanism's `MechanismUI.demo`. A flow that needs
no dashboard code lives in its mechanism's package (`engine/<mechanism>/demo.py`, with what every flow shares in
`engine.demo`); only the jury's is here, because its note gives the verdicts in the words the Jury page shows them
in (`dashboard.text.in_words`).
"""
