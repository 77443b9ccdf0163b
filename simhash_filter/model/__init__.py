"""The fingerprint model: how a page becomes a 64-bit simhash and a sketch.

``html`` parses, ``extract`` splits the page into blocks and finds the main content, ``segment`` and
``spelling`` tokenise, ``features`` and ``weights`` turn the tokens and the DOM into weighted features,
``fingerprint`` hashes them into the simhash, ``sketch`` into the sketch that verifies candidates, ``config``
holds every setting that changes a fingerprint (and names the model), ``explain`` says why two pages differ.

Imports nothing of the index, the Scrapy integration or the command line.
"""
