# Sphinx configuration of the static HTML edition of the course (`make book`).
# inferopt.book stages the stored notebooks (never re-executed) next to this file and builds from
# there; everything the pages need ships in the pinned wheels or in plotly's package: no download.
project = "Inference optimization: choosing techniques, and an end-to-end vLLM deployment"
author = "the course authors"
extensions = ["myst_nb"]
nb_execution_mode = "off"                 # the stored outputs are the book; CI re-runs them with nbval
nb_merge_streams = True
nb_render_markdown_format = "myst"      # display(Markdown(...)) tables render as tables
# Widgets cannot run in a static page: drop their view and show the text summary they store.
# Plotly outputs are staged as an HTML div (interactive) with the PNG kept as fallback for LaTeX.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
source_suffix = {".ipynb": "myst-nb", ".md": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_theme = "sphinx_book_theme"
html_title = "Inference optimization (course)"
html_theme_options = {"show_toc_level": 2, "use_download_button": False, "use_fullscreen_button": False}
html_static_path = ["_static"]
html_js_files = ["plotly.min.js"]          # copied from the installed plotly package at staging
html_last_updated_fmt = None
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]
