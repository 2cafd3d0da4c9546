"""How the defaults were chosen (on training data only), the robustness suite, and the notes of
each method family (``*.md``); ``common.py`` holds the data sets and peers they share."""
