"""The shipped demo data's generators (`make_demo`, `demo_drugs`, `demo_rad`, `phantoms`); the files
they write are in pxp/data/demo_data/.
"""
