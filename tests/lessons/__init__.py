"""Each lesson's tests, one package per slug (the notebooks' names); what every lesson shares sits here."""
