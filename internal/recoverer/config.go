package recoverer
