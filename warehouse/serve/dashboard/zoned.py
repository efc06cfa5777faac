"""The dashboard's days in a time zone other than UTC (`agentlake dashboard --tz`, `?tz=`), as
`agentlake report --tz` counts them (warehouse.serve.local_days).

The marts over a zone's days are computed by the first page asking for that zone on a reader's
connection, and kept as Arrow tables: every later cursor of that connection (a page each) only
registers them and makes the views of the tables, which cost no query. A new published catalog
gets a new connection (server.Reader), so a new `LocalMarts`: nothing computed from an older
snapshot is shown. UTC pages never come here: they read the stored marts as before."""

import threading
from collections import OrderedDict

from warehouse.serve.local_days import REPORT_MARTS, use_local_tables, use_zone

ZONES_KEPT = 4  # zones whose marts a connection keeps (a `?tz=` link per colleague's zone)


class LocalMarts:
    """The marts of each zone asked for on one reader connection, computed once."""

    def __init__(self, size: int = ZONES_KEPT):
        self.size, self.kept, self.lock = size, OrderedDict(), threading.Lock()

    def use(self, con, zone: str) -> None:
        """Shadows, on `con` (a cursor of this connection), the tables and marts the pages read
        with their rows on the days of `zone`."""
        with self.lock:  # the pages that come while the first computes them wait for it
            marts = self.kept.get(zone)
            if marts is None:
                use_zone(con, zone, REPORT_MARTS)  # on this cursor: temporary tables, read below
                marts = {name: con.execute(f'SELECT * FROM "{name}"').to_arrow_table() for name in REPORT_MARTS}
                self.kept[zone] = marts
                while len(self.kept) > self.size:
                    self.kept.popitem(last=False)
                return
            self.kept.move_to_end(zone)
        use_local_tables(con, zone, REPORT_MARTS)
        for name, rows in marts.items():
            con.register(name, rows)  # a temporary view over the Arrow table: it shadows the mart
