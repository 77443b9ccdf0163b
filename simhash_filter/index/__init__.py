"""The near-duplicate index: :mod:`.tables` (designs and bit helpers), :mod:`.bound` (the bound on a check's work),
:mod:`.backends` (the stores, by URI scheme) and :mod:`.nearduplicate` (the facade and the decision rule).  Imports
nothing of the Scrapy integration or the command line, and of the model only its sketches."""
