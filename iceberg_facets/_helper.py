"""Entry point of the delivery helper process (``python -m iceberg_facets._helper``): see
:mod:`iceberg_facets.delivery`. A module of its own, which the package does not import, so that running it
does not import it twice."""

from iceberg_facets.delivery import main

if __name__ == "__main__":
    main()
