"""Entry point of the delivery helper process (``python -m iceberg_facets._helper <parent pid>``): see
:mod:`iceberg_facets.helper`. A module of its own, which the package does not import, so that running it
does not import it twice."""

from iceberg_facets.helper import main

if __name__ == "__main__":
    main()
